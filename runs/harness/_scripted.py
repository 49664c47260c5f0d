"""Deterministic scripted models for offline runs and tests.

`scripted_model(script)` turns one script function (`messages, info -> ModelResponse`) into a pydantic-ai
`FunctionModel` that serves plain and streamed requests alike, streaming text and thinking in small chunks so
observers see realistic deltas.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from pydantic_ai import ModelMessage, ModelResponse, TextPart, ThinkingPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, DeltaThinkingPart, DeltaToolCall, FunctionModel

__all__ = ("Script", "scripted_model", "stream_script")

Script = Callable[[list[ModelMessage], AgentInfo], ModelResponse]


def _chunks(text: str, size: int) -> list[str]:
    return [text[start : start + size] for start in range(0, len(text), size)] if size else [text]


def stream_script(script: Script, *, chunk: int = 12) -> Callable[..., AsyncIterator[Any]]:
    """A `FunctionModel` stream function that streams the responses of `script` in chunks."""

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        response = script(messages, info)
        for index, part in enumerate(response.parts):
            if isinstance(part, TextPart):
                for piece in _chunks(part.content, chunk):
                    yield piece
            elif isinstance(part, ThinkingPart):
                pieces = _chunks(part.content, chunk)
                for number, piece in enumerate(pieces):
                    signature = part.signature if number == len(pieces) - 1 else None
                    yield {index: DeltaThinkingPart(content=piece, signature=signature)}
            elif isinstance(part, ToolCallPart):
                args = part.args if isinstance(part.args, str) else json.dumps(part.args or {})
                yield {index: DeltaToolCall(name=part.tool_name, json_args=args, tool_call_id=part.tool_call_id)}
            else:
                raise TypeError(f"a scripted model cannot stream {type(part).__name__}")

    return stream


def scripted_model(script: Script, *, chunk: int = 12, model_name: str = "scripted") -> FunctionModel:
    """A `FunctionModel` whose plain and streamed responses both come from `script`."""
    return FunctionModel(script, stream_function=stream_script(script, chunk=chunk), model_name=model_name)
