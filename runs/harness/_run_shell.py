"""`RunShell`: one run's observation of the commands its shell environment runs.

References are minted per run (`<run id>:shell-<n>`), so a reference read back from history in a later run
names nothing there and is refused; a later run reaches a retained command only by discovering it again,
under a new reference. Reading output takes explicit offsets and consumes nothing, so a query never resets
what the model can read; the run keeps no cursor. Closing the run releases every observation and closes the
adapter without stopping any command. None of this is capability state: only the adapter's own
`dump_state()` reaches an exported `HarnessState`, as `environment_states`.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
from typing import Literal

from pydantic import BaseModel, ConfigDict

from ._errors import RunError
from ._shell import ShellAction, ShellCommand, ShellEnvironment, ShellSignal, ShellStatus, ShellStream
from ._state import EnvironmentState

__all__ = ("SHELL_MOUNT", "RunShell", "ShellInfo", "ShellListing", "ShellOutput", "ShellPage", "ShellRefusal")

SHELL_MOUNT = "workspace"
"""The mount name of a run's shell environment in `HarnessState.environment_states`."""


class ShellOutput(BaseModel):
    """One page of a stream: the text at `offset`, and where the next page starts."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    text: str
    offset: int
    next_offset: int
    more: bool | None
    """More bytes were retained beyond `next_offset` when this page was read; `None` when unknown."""
    retained: int | None


class ShellPage(BaseModel):
    """A command's status and a page of each stream. An `exited` status does not mean all output was read."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ok: Literal[True] = True
    process_id: str
    command: str
    status: ShellStatus
    stdout: ShellOutput
    stderr: ShellOutput


class ShellInfo(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    ok: Literal[True] = True
    process_id: str
    command: str
    status: ShellStatus


class ShellListing(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    ok: Literal[True] = True
    processes: tuple[ShellInfo, ...]


class ShellRefusal(BaseModel):
    """What a shell tool answers instead of acting: a stable code and a message for the model."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ok: Literal[False] = False
    code: str
    message: str


class RunShell:
    """The commands one run observes, by the references it minted."""

    def __init__(self, environment: ShellEnvironment, *, run_id: str) -> None:
        self._environment = environment
        self._prefix = f"{run_id}:shell-"
        self._commands: dict[str, ShellCommand] = {}
        self._references: dict[str, str] = {}
        self._closed = False
        self._starting: set[asyncio.Future[ShellCommand]] = set()

    @property
    def actions(self) -> frozenset[ShellAction]:
        return self._environment.actions

    @property
    def references(self) -> tuple[str, ...]:
        """The references this run can still use."""
        return tuple(self._commands)

    def environment_states(self) -> dict[str, EnvironmentState]:
        state = self._environment.dump_state()
        return {} if state is None else {SHELL_MOUNT: state}

    async def start(self, command: str, *, yield_seconds: float, limit: int) -> ShellPage:
        self._require("exec")
        if not command.strip():
            raise RunError("the command is empty", code="shell_command_invalid")
        starting = asyncio.ensure_future(self._environment.start(command))
        try:
            native = await asyncio.shield(starting)
        except asyncio.CancelledError:
            # The command may start all the same; `close()` waits for it and releases it.
            self._starting.add(starting)
            raise
        reference = self._observe(native)
        await self._commands[reference].wait(yield_seconds)
        return await self._page(reference, 0, 0, limit)

    async def wait(
        self, reference: str, *, stdout_offset: int, stderr_offset: int, seconds: float, limit: int
    ) -> ShellPage:
        self._require("wait")
        await self._command(reference).wait(seconds)
        return await self._page(reference, stdout_offset, stderr_offset, limit)

    async def inspect(self, reference: str) -> ShellInfo:
        self._require("inspect")
        return await self._info(reference)

    async def discover(self) -> ShellListing:
        """This run's commands and those the backend retained, each under a reference of this run."""
        self._require("list")
        for command in await self._environment.discover():
            self._observe(command)
        return ShellListing(processes=tuple([await self._info(reference) for reference in self._commands]))

    async def write(self, reference: str, text: str, *, close: bool) -> ShellInfo:
        self._require("input")
        await self._command(reference).write(text.encode(), close=close)
        return await self._info(reference)

    async def signal(self, reference: str, kind: ShellSignal) -> ShellInfo:
        self._require("signal")
        await self._command(reference).signal(kind)
        return await self._info(reference)

    async def close(self) -> list[BaseException]:
        """Release every observation, then close the adapter; commands keep running. Returns what failed."""
        self._closed = True
        causes: list[BaseException] = []
        commands = list(self._commands.values())
        self._commands = {}
        for starting in self._starting:
            with contextlib.suppress(Exception):
                commands.append(await starting)
        for command in commands:
            try:
                await command.release()
            except Exception as exc:
                causes.append(exc)
        try:
            await self._environment.close()
        except Exception as exc:
            causes.append(exc)
        return causes

    def _observe(self, command: ShellCommand) -> str:
        known = self._references.get(command.key)
        if known is not None:
            return known
        reference = f"{self._prefix}{len(self._references) + 1}"
        self._references[command.key] = reference
        self._commands[reference] = command
        return reference

    async def _info(self, reference: str) -> ShellInfo:
        command = self._command(reference)
        return ShellInfo(process_id=reference, command=command.command, status=await command.status())

    def _require(self, action: ShellAction) -> None:
        if self._closed:
            raise RunError("the run's shell observations were released", code="shell_released")
        if action not in self._environment.actions:
            raise RunError(f"this shell does not support '{action}'", code="shell_action_unsupported")

    def _command(self, reference: str) -> ShellCommand:
        command = self._commands.get(reference)
        if command is not None:
            return command
        if not reference.startswith(self._prefix):
            raise RunError(
                f"{reference!r} is not a process of this run: references do not carry over between runs",
                code="process_reference_foreign",
            )
        raise RunError(f"this run has no process {reference!r}", code="process_reference_unknown")

    async def _page(self, reference: str, stdout_offset: int, stderr_offset: int, limit: int) -> ShellPage:
        command = self._commands[reference]
        # Status first: output read after it is at least as complete as the status says.
        status = await command.status()
        return ShellPage(
            process_id=reference,
            command=command.command,
            status=status,
            stdout=await _output(command, "stdout", stdout_offset, limit),
            stderr=await _output(command, "stderr", stderr_offset, limit),
        )


async def _output(command: ShellCommand, stream: ShellStream, offset: int, limit: int) -> ShellOutput:
    chunk = await command.read(stream, offset, limit)
    text, used = _complete_utf8(chunk.data)
    end = offset + used
    more = None if chunk.retained is None else chunk.retained > end
    return ShellOutput(text=text, offset=offset, next_offset=end, more=more, retained=chunk.retained)


def _complete_utf8(data: bytes) -> tuple[str, int]:
    """The text of `data` up to its last complete UTF-8 character, and how many bytes that is.

    A page cut inside a character would show a replacement character and start the next page with garbage,
    so the cut bytes are left for the next page; a page of nothing but a cut character is decoded as is.
    """
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    text = decoder.decode(data, final=False)
    pending, _ = decoder.getstate()
    if data and len(pending) == len(data):
        return data.decode(errors="replace"), len(data)
    return text, len(data) - len(pending)
