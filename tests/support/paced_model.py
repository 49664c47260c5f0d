"""A model that paces like a real one: each call waits, then streams `DELTAS` deltas; three calls per run.

For the concurrent worker's tests and bench: `HARNESS_DEMO_MODEL=tests.support.paced_model.model` and
`HARNESS_TOOLSETS=tests.support.paced_model.toolset`, with a profile whose model is "demo" and whose tools are
`TOOLS`. The first two calls stream the arguments of a `tick` call, the third streams the answer's text. A
number in the prompt sets the wait in seconds (default `WAIT_SECONDS`); a prompt with "explode" has the model
call `explode`, a tool that raises.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator

from pydantic_ai import ModelMessage, ModelRequest, ModelResponse, UserPromptPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel
from pydantic_ai.toolsets import FunctionToolset

from runs.harness import recovery_retryable

__all__ = ("CALLS", "DELTAS", "TOOLS", "WAIT_SECONDS", "model", "toolset")

WAIT_SECONDS = 1.0
DELTAS = 50
CALLS = 3
TOOLS = ["tick", "explode"]


async def tick(note: str) -> str:
    """Note that a step is done."""
    return f"noted {len(note)} characters"


def explode() -> str:
    """Fail in the host, as a broken tool would."""
    raise RuntimeError("the explode tool always fails")


toolset = FunctionToolset([recovery_retryable(tick), explode])


def _prompt(messages: list[ModelMessage]) -> str:
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                    return part.content
    return ""


async def _stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
    prompt = _prompt(messages)
    calls = sum(isinstance(message, ModelResponse) for message in messages)
    if "explode" in prompt and calls == 0:
        yield {0: DeltaToolCall(name="explode", json_args="{}", tool_call_id="explode-0")}
        return
    number = re.search(r"\d+(\.\d+)?", prompt)
    await asyncio.sleep(float(number.group()) if number else WAIT_SECONDS)
    if calls >= CALLS - 1:
        for index in range(DELTAS):
            yield f"w{index} "
        return
    call_id = f"tick-{calls}"
    yield {0: DeltaToolCall(name="tick", json_args='{"note": "', tool_call_id=call_id)}
    for index in range(DELTAS - 2):
        yield {0: DeltaToolCall(json_args=f"n{index} ")}
    yield {0: DeltaToolCall(json_args='"}')}


def model() -> FunctionModel:
    return FunctionModel(stream_function=_stream, model_name="paced")
