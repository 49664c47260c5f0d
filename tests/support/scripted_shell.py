"""A scripted shell backend and a model script that drives the shell tools, for the shell observation tests."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo
from pydantic_core import to_jsonable_python

from runs.harness import EnvironmentState, Script, ShellAction, ShellChunk, ShellSignal, ShellStatus, ShellStream

ALL_ACTIONS: frozenset[ShellAction] = frozenset({"exec", "inspect", "list", "wait", "input", "signal"})


@dataclass(eq=False)
class ScriptedCommand:
    """A command whose output and status the test sets; it records what the run did to it."""

    key: str
    command: str
    output: dict[ShellStream, bytes] = field(default_factory=lambda: {"stdout": b"", "stderr": b""})
    state: ShellStatus = field(default_factory=lambda: ShellStatus(state="running"))
    stdin: bytes = b""
    signals: list[ShellSignal] = field(default_factory=list)
    released: bool = False

    async def status(self) -> ShellStatus:
        return self.state

    async def wait(self, seconds: float) -> ShellStatus:
        return self.state

    async def read(self, stream: ShellStream, offset: int, limit: int) -> ShellChunk:
        data = self.output[stream]
        return ShellChunk(data=data[offset : offset + limit], retained=len(data))

    async def write(self, data: bytes, *, close: bool) -> None:
        self.stdin += data

    async def signal(self, kind: ShellSignal) -> None:
        self.signals.append(kind)

    async def release(self) -> None:
        self.released = True


@dataclass(eq=False)
class ScriptedShell:
    """A stateful backend: `retained` are commands a restored adapter finds, `state` its provider evidence."""

    actions: frozenset[ShellAction] = ALL_ACTIONS
    retained: list[ScriptedCommand] = field(default_factory=list)
    started: list[ScriptedCommand] = field(default_factory=list)
    outputs: dict[str, bytes] = field(default_factory=dict)
    closed: bool = False
    close_error: Exception | None = None
    start_gate: asyncio.Event | None = None
    starting: asyncio.Event = field(default_factory=asyncio.Event)

    async def start(self, command: str) -> ScriptedCommand:
        self.starting.set()
        if self.start_gate is not None:
            await self.start_gate.wait()
        started = ScriptedCommand(key=f"native-{len(self.started) + 1}", command=command)
        started.output["stdout"] = self.outputs.get(command, b"")
        self.started.append(started)
        return started

    async def discover(self) -> Sequence[ScriptedCommand]:
        return list(self.retained)

    def dump_state(self) -> EnvironmentState | None:
        keys = [command.key for command in [*self.retained, *self.started]]
        return EnvironmentState(
            provider_key="scripted_shell", state_version="1", state={"sandbox": "sb-1", "commands": keys}
        )

    async def close(self) -> None:
        if self.close_error is not None:
            raise self.close_error
        self.closed = True


Step = tuple[str, dict[str, Any] | Callable[[list[Any]], dict[str, Any]]]


def tool_results(messages: Sequence[ModelMessage]) -> list[Any]:
    """The content of every tool return after the last user prompt, as JSON values, in order."""
    return [
        to_jsonable_python(part.content)
        for message in messages[_last_prompt(messages) :]
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]


def calling(steps: Sequence[Step]) -> Script:
    """A script that makes one tool call per step (arguments may depend on earlier results), then says done."""

    def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        results = tool_results(messages)
        if len(results) == len(steps):
            return ModelResponse(parts=[TextPart("done")])
        name, args = steps[len(results)]
        arguments = args(results) if callable(args) else args
        return ModelResponse(parts=[ToolCallPart(name, arguments, f"call-{len(results)}")])

    return script


def _last_prompt(messages: Sequence[ModelMessage]) -> int:
    for index in range(len(messages) - 1, -1, -1):
        if any(part.part_kind == "user-prompt" for part in messages[index].parts):
            return index
    return 0
