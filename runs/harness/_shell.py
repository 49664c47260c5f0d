"""What a shell backend offers one Harness run: the protocols and the values they return.

A `ShellEnvironment` is one fresh, process-local adapter for one run. It starts commands and hands back
native `ShellCommand` handles; the run (`RunShell`) gives each handle a reference of its own and is the only
thing the model talks to. Nothing here is stored in `HarnessState` except what `dump_state()` returns: the
provider's native recovery evidence, which the Host owns and publishes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from ._state import EnvironmentState

__all__ = (
    "ShellAction",
    "ShellChunk",
    "ShellCommand",
    "ShellEnvironment",
    "ShellSignal",
    "ShellStatus",
    "ShellStream",
)

ShellAction = Literal["exec", "inspect", "list", "wait", "input", "signal"]
"""What a backend can do: start commands, inspect one, list (discover) retained ones, wait and read output,
write stdin, send a control signal. The run exposes only the tools its backend's actions allow."""

ShellSignal = Literal["interrupt", "terminate", "kill"]
ShellStream = Literal["stdout", "stderr"]


class ShellStatus(BaseModel):
    """A command's native status. `exited` says the process ended, never that its output was all captured.

    A negative `exit_code` is the signal that ended the process (POSIX convention); `None` is unknown.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    state: Literal["running", "exited", "unknown"]
    exit_code: int | None = None


class ShellChunk(BaseModel):
    """Bytes a backend retained for one stream, read at an offset without consuming them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    data: bytes
    retained: int | None
    """How many bytes the backend holds for the stream so far; `None` when it cannot tell."""


class ShellCommand(Protocol):
    """A backend's handle on one native command, observed by one run."""

    @property
    def key(self) -> str:
        """The backend's own identity of the command (never shown to the model)."""
        ...

    @property
    def command(self) -> str: ...

    async def status(self) -> ShellStatus: ...

    async def wait(self, seconds: float) -> ShellStatus:
        """Wait at most `seconds` for the command to end; return its status either way."""
        ...

    async def read(self, stream: ShellStream, offset: int, limit: int) -> ShellChunk: ...

    async def write(self, data: bytes, *, close: bool) -> None: ...

    async def signal(self, kind: ShellSignal) -> None: ...

    async def release(self) -> None:
        """Stop observing the command (watchers, buffers, handles). Never stops the command itself."""
        ...


@runtime_checkable
class ShellEnvironment(Protocol):
    """One fresh adapter per run for one mount; the Host constructs it with the provider state it trusts."""

    @property
    def actions(self) -> frozenset[ShellAction]: ...

    async def start(self, command: str) -> ShellCommand: ...

    async def discover(self) -> Sequence[ShellCommand]:
        """Commands the backend retained from before this adapter (only with the `list` action)."""
        ...

    def dump_state(self) -> EnvironmentState | None:
        """The provider's current native recovery evidence, or `None` for a stateless backend. No I/O."""
        ...

    async def close(self) -> None:
        """Release process-local resources. Never stops commands and never destroys the target."""
        ...
