"""Replaying a recorded run with no model and no side effects.

A `Replay` holds the messages one recorded execution added to its thread. It offers a model that answers the
n-th request with the n-th recorded response, and a toolset wrapper that answers each call with its recorded
result instead of running the tool. Before answering, each checks that the current agent asks for what the
recording has: the same request (instructions, prompts, tool results and retries) and tools it still offers.
The first step where it does not is kept as the replay's `Divergence` and ends the run with `ReplayDiverged`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from pydantic_ai import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    ModelRetry,
    RetryPromptPart,
    RunContext,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import AbstractToolset, WrapperToolset
from pydantic_ai.toolsets.abstract import ToolsetTool

from ._errors import RunError
from ._scripted import scripted_model

__all__ = ("Divergence", "DivergenceKind", "Replay", "ReplayDiverged")

DivergenceKind = Literal["request", "tool", "extra_request", "ended_early", "result_missing", "run_ended"]

# How much of a request part a divergence quotes: enough to see the difference, short enough for one line.
_QUOTE_CHARS = 160


@dataclass(frozen=True, slots=True)
class Divergence:
    """The first step where the current agent asked for something the recording does not have."""

    step: int
    kind: DivergenceKind
    expected: str
    asked: str

    def summary(self) -> str:
        return f"step {self.step} ({self.kind}): expected {self.expected}; asked {self.asked}"

    def as_json(self) -> dict[str, Any]:
        return {"step": self.step, "kind": self.kind, "expected": self.expected, "asked": self.asked}


class ReplayDiverged(RunError):
    """Ends a replay run at its first divergence (the run fails with code ``replay_diverged``)."""

    def __init__(self, divergence: Divergence) -> None:
        super().__init__(f"the replay diverged at {divergence.summary()}", code="replay_diverged")
        self.divergence = divergence


def _quote(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= _QUOTE_CHARS else f"{text[: _QUOTE_CHARS - 1]}…"


def _request_parts(messages: Sequence[ModelMessage]) -> list[str]:
    """What a model request asks, as comparable lines: the requests after the last response, timestamps left out."""
    trailing: list[ModelRequest] = []
    for message in reversed(messages):
        if isinstance(message, ModelResponse):
            break
        trailing.insert(0, message)
    lines: list[str] = []
    for request in trailing:
        if request.instructions:
            lines.append(f"instructions {_quote(request.instructions)}")
        for part in request.parts:
            if isinstance(part, ToolReturnPart):
                lines.append(f"result of {part.tool_name} ({part.tool_call_id}) {_quote(part.content)}")
            elif isinstance(part, RetryPromptPart):
                about = f"{part.tool_name} ({part.tool_call_id})" if part.tool_name else "the output"
                lines.append(f"retry of {about} {_quote(part.content)}")
            else:
                lines.append(f"{part.part_kind} {_quote(getattr(part, 'content', ''))}")
    return lines


class Replay:
    """One replay of a recording; build the agent with `model()` and `wrap(toolset)`, then read `divergence`."""

    def __init__(self, recorded: Sequence[ModelMessage]) -> None:
        self._recorded = list(recorded)
        self._responses = [message for message in recorded if isinstance(message, ModelResponse)]
        self._results: dict[str, ToolReturnPart | RetryPromptPart] = {}
        for message in recorded:
            if isinstance(message, ModelRequest):
                for part in message.parts:
                    if isinstance(part, ToolReturnPart | RetryPromptPart) and part.tool_name:
                        self._results[part.tool_call_id] = part
        self.steps = 0
        self.divergence: Divergence | None = None

    @property
    def recorded_steps(self) -> int:
        return len(self._responses)

    def model(self) -> FunctionModel:
        return scripted_model(self._respond, model_name="replay")

    def wrap(self, toolset: AbstractToolset[Any]) -> AbstractToolset[Any]:
        return _RecordedToolset(toolset, self)

    def finish(self) -> Divergence | None:
        """After a run that ended by itself: a recording with responses left over diverges too."""
        if self.divergence is None and self.steps < self.recorded_steps:
            self.divergence = Divergence(
                self.steps + 1,
                "ended_early",
                f"model request {self.steps + 1} of {self.recorded_steps}",
                "no further request (the run ended)",
            )
        return self.divergence

    def diverge(self, kind: DivergenceKind, expected: str, asked: str, *, step: int | None = None) -> ReplayDiverged:
        if self.divergence is None:
            self.divergence = Divergence(self.steps if step is None else step, kind, expected, asked)
        return ReplayDiverged(self.divergence)

    def recorded_result(self, tool_call_id: str | None) -> ToolReturnPart | RetryPromptPart | None:
        return self._results.get(tool_call_id or "")

    def _recorded_request(self, step: int) -> list[str]:
        response = self._responses[step - 1]
        position = next(index for index, message in enumerate(self._recorded) if message is response)
        return _request_parts(self._recorded[:position])

    def _respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if self.divergence is not None:
            raise ReplayDiverged(self.divergence)
        self.steps += 1
        step = self.steps
        asked = _request_parts(messages)
        if step > self.recorded_steps:
            raise self.diverge(
                "extra_request", f"no request (the recording ends after {self.recorded_steps})", "; ".join(asked)
            )
        expected = self._recorded_request(step)
        if asked != expected:
            index = next(
                (i for i, (a, e) in enumerate(zip(asked, expected, strict=False)) if a != e),
                min(len(asked), len(expected)),
            )
            raise self.diverge(
                "request",
                expected[index] if index < len(expected) else "nothing more",
                asked[index] if index < len(asked) else "nothing more",
            )
        response = self._responses[step - 1]
        offered = {tool.name for tool in [*info.function_tools, *info.output_tools]}
        for call in response.tool_calls:
            if call.tool_name not in offered:
                raise self.diverge(
                    "tool",
                    f"a tool named {call.tool_name} (the recording calls it with {_quote(call.args_as_dict())})",
                    f"the current agent has no such tool; it offers {', '.join(sorted(offered)) or 'none'}",
                )
        return response


@dataclass
class _RecordedToolset(WrapperToolset[Any]):
    """The current agent's tools (their names, schemas and argument validation) answered from the recording."""

    replay: Replay | None = None

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        tools = await super().get_tools(ctx)
        # Every call is answered here: none may wait for an approval or an external answer as the original did.
        return {name: replace(tool, tool_def=replace(tool.tool_def, kind="function")) for name, tool in tools.items()}

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        replay = self.replay
        assert replay is not None
        recorded = replay.recorded_result(ctx.tool_call_id)
        if recorded is None or recorded.tool_name != name:
            raise replay.diverge(
                "result_missing",
                "a recorded result for this call" if recorded is None else f"a call of {recorded.tool_name}",
                f"{name} ({ctx.tool_call_id}) with {_quote(tool_args)}",
            )
        if isinstance(recorded, RetryPromptPart):
            raise ModelRetry(recorded.content if isinstance(recorded.content, str) else _quote(recorded.content))
        return recorded.content
