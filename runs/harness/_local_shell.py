"""`LocalShellEnvironment`: commands as subprocesses of this machine, for one run.

Not a sandbox: a command can reach whatever this process can. It is never part of the Host's demo toolset;
an application opts in by passing one to a run it trusts with a shell.

Output goes to files, not pipes: when the run releases a command, the files are unlinked and their handles
closed, and the command keeps writing to its (now nameless) files. A pipe would instead fill up and block
the command, or kill it with SIGPIPE once its reader closed, which is a kill by another name. The command's
stdin is a pipe, so releasing it closes stdin (the command sees end of input).

Stateless like the reference's Direct Local: `dump_state()` is `None` and nothing is discoverable, because
this process's children cannot be re-attached by a later adapter.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

from ._errors import RunError
from ._shell import ShellAction, ShellChunk, ShellCommand, ShellSignal, ShellStatus, ShellStream
from ._state import EnvironmentState

__all__ = ("LocalShellEnvironment",)

_SIGNALS: dict[ShellSignal, int] = {
    "interrupt": signal.SIGINT,
    "terminate": signal.SIGTERM,
    "kill": signal.SIGKILL,
}
# Commands get these variables from this process and nothing else: the worker's environment holds secrets.
_INHERITED = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE")


class _LocalCommand:
    """One subprocess; its watcher is a pidfd the event loop watches, readable once the process ended."""

    def __init__(self, key: str, command: str, process: subprocess.Popen[bytes], logs: Path) -> None:
        self._key = key
        self._command = command
        self._process = process
        self._logs = logs
        self._files: dict[ShellStream, IO[bytes]] = {
            "stdout": (logs / "stdout").open("rb"),
            "stderr": (logs / "stderr").open("rb"),
        }
        self._ended = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        self._pidfd: int | None = os.pidfd_open(process.pid)
        self._loop.add_reader(self._pidfd, self._exited)

    def _exited(self) -> None:
        # A pidfd stays readable after the exit; watching on would call this on every loop iteration.
        assert self._pidfd is not None
        self._loop.remove_reader(self._pidfd)
        self._ended.set()

    @property
    def key(self) -> str:
        return self._key

    @property
    def command(self) -> str:
        return self._command

    async def status(self) -> ShellStatus:
        code = self._process.poll()
        return ShellStatus(state="running") if code is None else ShellStatus(state="exited", exit_code=code)

    async def wait(self, seconds: float) -> ShellStatus:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._ended.wait()
        return await self.status()

    async def read(self, stream: ShellStream, offset: int, limit: int) -> ShellChunk:
        descriptor = self._files[stream].fileno()
        return ShellChunk(data=os.pread(descriptor, limit, offset), retained=os.fstat(descriptor).st_size)

    async def write(self, data: bytes, *, close: bool) -> None:
        stdin = self._process.stdin
        assert stdin is not None
        if stdin.closed:
            raise RunError("the command's stdin is closed", code="shell_stdin_closed")
        if data:
            await asyncio.to_thread(_write_all, stdin, data)
        if close:
            stdin.close()

    async def signal(self, kind: ShellSignal) -> None:
        if self._process.poll() is not None:
            return
        # The command leads its own session, so the signal reaches what it started too.
        os.killpg(self._process.pid, _SIGNALS[kind])

    async def release(self) -> None:
        if self._pidfd is not None:
            self._loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None
        for handle in self._files.values():
            handle.close()
        shutil.rmtree(self._logs, ignore_errors=True)
        if self._process.stdin is not None and not self._process.stdin.closed:
            self._process.stdin.close()
        if self._process.poll() is None:
            # Only reaps the exit status once the command ends on its own; nobody reads it.
            threading.Thread(target=self._process.wait, name=f"reap-{self._process.pid}", daemon=True).start()


def _write_all(stdin: IO[bytes], data: bytes) -> None:
    stdin.write(data)
    stdin.flush()


class LocalShellEnvironment:
    """Runs each command with `/bin/sh -c` in `root`, in its own session, output to run-private files."""

    actions: frozenset[ShellAction] = frozenset({"exec", "inspect", "wait", "input", "signal"})

    def __init__(self, root: str | Path, *, env: Mapping[str, str] | None = None) -> None:
        self._root = Path(root).expanduser().resolve()
        if not self._root.is_dir():
            raise ValueError(f"the shell's root {self._root} is not a directory")
        self._env = {name: os.environ[name] for name in _INHERITED if name in os.environ} | dict(env or {})
        self._logs: Path | None = None
        self._started = 0

    async def start(self, command: str) -> ShellCommand:
        if self._logs is None:
            self._logs = Path(tempfile.mkdtemp(prefix="harness-shell-"))
        self._started += 1
        logs = self._logs / str(self._started)
        logs.mkdir()
        with (logs / "stdout").open("wb") as stdout, (logs / "stderr").open("wb") as stderr:
            process = await asyncio.to_thread(
                subprocess.Popen,
                ["/bin/sh", "-c", command],
                cwd=self._root,
                env=self._env,
                stdin=subprocess.PIPE,
                stdout=stdout,
                stderr=stderr,
                start_new_session=True,
            )
        return _LocalCommand(f"local-{self._started}", command, process, logs)

    async def discover(self) -> Sequence[ShellCommand]:
        return ()

    def dump_state(self) -> EnvironmentState | None:
        return None

    async def close(self) -> None:
        if self._logs is not None:
            shutil.rmtree(self._logs, ignore_errors=True)
