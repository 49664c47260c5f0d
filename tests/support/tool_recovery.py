"""Scripted models, histories and tool spies for the deferred-tool and tool-recovery tests."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pydantic_ai import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from runs.harness import INTERRUPTED_TOOL_RESULT, scripted_model

FIXED_TIME = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass
class Recorder:
    """Records what the model saw on each request and what it answered."""

    requests: list[list[ModelMessage]] = field(default_factory=list)
    calls_after_results: Sequence[ToolCallPart] = ()

    def script(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.requests.append(list(messages))
        if self.calls_after_results and len(self.requests) == 1:
            return ModelResponse(parts=list(self.calls_after_results))
        return ModelResponse(parts=[TextPart("done")])

    def model(self) -> FunctionModel:
        return scripted_model(self.script)

    def first_request_results(self) -> dict[str, ToolReturnPart]:
        """Tool returns the first model request carried, by call id."""
        return {
            part.tool_call_id: part
            for message in self.requests[0]
            if isinstance(message, ModelRequest)
            for part in message.parts
            if isinstance(part, ToolReturnPart)
        }


@dataclass
class Spy:
    """Counts executions of tools and remembers their arguments."""

    runs: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def tool(self, name: str) -> Callable[..., str]:
        def run(x: int = 0) -> str:
            self.runs.append((name, {"x": x}))
            return f"{name} ran with {x}"

        run.__name__ = name
        return run

    def names(self) -> list[str]:
        return [name for name, _ in self.runs]


def checkpoint_history(*tail: ModelMessage) -> list[ModelMessage]:
    """`[request(user), response(text, c1→a, c2→b)]` followed by `tail`."""
    return [
        ModelRequest(parts=[UserPromptPart("work", timestamp=FIXED_TIME)], timestamp=FIXED_TIME),
        ModelResponse(
            timestamp=FIXED_TIME,
            parts=[
                TextPart("calling tools"),
                ToolCallPart("a", {"x": 1}, tool_call_id="c1"),
                ToolCallPart("b", {"x": 2}, tool_call_id="c2"),
            ],
        ),
        *tail,
    ]


def checkpoint_calls() -> list[ToolCallPart]:
    """The calls of `checkpoint_history()`'s response: c1→a, c2→b."""
    response = checkpoint_history()[1]
    assert isinstance(response, ModelResponse)
    return response.tool_calls


def unknown(name: str, tool_call_id: str) -> ToolReturnPart:
    return ToolReturnPart(name, INTERRUPTED_TOOL_RESULT, tool_call_id=tool_call_id, outcome="failed")


def returns_by_id(messages: Sequence[ModelMessage]) -> dict[str, list[ToolReturnPart]]:
    found: dict[str, list[ToolReturnPart]] = {}
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, ToolReturnPart):
                    found.setdefault(part.tool_call_id, []).append(part)
    return found


def is_unknown(part: ToolReturnPart) -> bool:
    return part.outcome == "failed" and part.content == INTERRUPTED_TOOL_RESULT


@dataclass
class CallingModel:
    """Makes `calls` when the last request carries no tool result; otherwise reports the results it got."""

    calls: Sequence[ToolCallPart]
    requests: list[list[ModelMessage]] = field(default_factory=list)

    def script(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.requests.append(list(messages))
        last = messages[-1]
        results = [part for part in last.parts if isinstance(part, ToolReturnPart)]
        if not results:
            return ModelResponse(parts=list(self.calls))
        return ModelResponse(parts=[TextPart(" | ".join(f"{p.tool_call_id}:{p.outcome}:{p.content}" for p in results))])

    def model(self) -> FunctionModel:
        return scripted_model(self.script)
