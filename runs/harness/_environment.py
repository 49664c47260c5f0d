"""`DynamicEnvironmentCapability`: the shell tools a run offers when it has a shell environment.

The capability belongs to an agent definition; the environment belongs to one run (`environment=` of
`run()`/`stream()`). A tool is offered only when the run has an environment whose actions allow it, so the
same definition runs with or without a shell. A refused call (another run's reference, an action the backend
lacks, released observations) answers a `ShellRefusal` the model can read; it is not a failed run.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, TypeVar

from pydantic import Field
from pydantic_ai import RunContext, Tool, ToolDefinition
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.toolsets import AgentToolset, FunctionToolset

from ._context import AgentContext
from ._errors import RunError
from ._run_shell import ShellInfo, ShellListing, ShellPage, ShellRefusal
from ._shell import ShellAction, ShellSignal

__all__ = ("SHELL_TOOL_NAMES", "DynamicEnvironmentCapability")

WaitSeconds = Annotated[float, Field(ge=0, le=60)]
Offset = Annotated[int, Field(ge=0)]
PageBytes = Annotated[int, Field(ge=1024, le=65536)]

ResultT = TypeVar("ResultT")


async def _refusing(action: Awaitable[ResultT]) -> ResultT | ShellRefusal:
    try:
        return await action
    except RunError as exc:
        return ShellRefusal(code=exc.code, message=str(exc))
    except OSError as exc:
        # The backend's own failure (a broken pipe, a vanished process): the model may try something else.
        return ShellRefusal(code="shell_backend_error", message=f"{type(exc).__name__}: {exc}")


async def shell_exec(
    ctx: RunContext[AgentContext], command: str, yield_time_seconds: WaitSeconds = 10, page_bytes: PageBytes = 16384
) -> ShellPage | ShellRefusal:
    """Start a shell command; wait up to `yield_time_seconds` for it, then return its status and first output.

    The `process_id` is valid in this run only. Read further output with `shell_wait` and the offsets given.
    """
    return await _refusing(ctx.deps.run_shell.start(command, yield_seconds=yield_time_seconds, limit=page_bytes))


async def shell_info(
    ctx: RunContext[AgentContext], process_id: str | None = None
) -> ShellInfo | ShellListing | ShellRefusal:
    """Without `process_id`, list the commands this run can reach; with it, inspect one command's status.

    Inspecting reads no output and changes nothing.
    """
    shell = ctx.deps.run_shell
    return await _refusing(shell.discover() if process_id is None else shell.inspect(process_id))


async def shell_wait(
    ctx: RunContext[AgentContext],
    process_id: str,
    stdout_offset: Offset,
    stderr_offset: Offset,
    timeout_seconds: WaitSeconds = 0,
    page_bytes: PageBytes = 16384,
) -> ShellPage | ShellRefusal:
    """Wait up to `timeout_seconds` for the command to end (0 polls), then read output at the given offsets.

    Reading consumes nothing: the same offsets read the same bytes again, `next_offset` starts the next page.
    An exited status does not mean all output was read; read on while `more` is true.
    """
    return await _refusing(
        ctx.deps.run_shell.wait(
            process_id,
            stdout_offset=stdout_offset,
            stderr_offset=stderr_offset,
            seconds=timeout_seconds,
            limit=page_bytes,
        )
    )


async def shell_input(
    ctx: RunContext[AgentContext], process_id: str, text: str, close_stdin: bool = False
) -> ShellInfo | ShellRefusal:
    """Write text to the command's stdin (and optionally close it). Reads no output."""
    return await _refusing(ctx.deps.run_shell.write(process_id, text, close=close_stdin))


async def shell_signal(ctx: RunContext[AgentContext], process_id: str, signal: ShellSignal) -> ShellInfo | ShellRefusal:
    """Interrupt, terminate or kill the command and what it started. Reads no output."""
    return await _refusing(ctx.deps.run_shell.signal(process_id, signal))


def _offered_when(*actions: ShellAction) -> Callable[[RunContext[AgentContext], ToolDefinition], Awaitable[Any]]:
    async def prepare(ctx: RunContext[AgentContext], tool_def: ToolDefinition) -> ToolDefinition | None:
        shell = ctx.deps.shell
        return tool_def if shell is not None and not shell.actions.isdisjoint(actions) else None

    return prepare


_TOOLS: tuple[tuple[Callable[..., Any], tuple[ShellAction, ...]], ...] = (
    (shell_exec, ("exec",)),
    (shell_info, ("inspect", "list")),
    (shell_wait, ("wait",)),
    (shell_input, ("input",)),
    (shell_signal, ("signal",)),
)
SHELL_TOOL_NAMES = tuple(function.__name__ for function, _ in _TOOLS)


@dataclass
class DynamicEnvironmentCapability(AbstractCapability[AgentContext]):
    """Offers the shell tools to runs that were given a shell environment."""

    toolset: FunctionToolset[AgentContext] = field(
        default_factory=lambda: FunctionToolset(
            [Tool(function, prepare=_offered_when(*actions)) for function, actions in _TOOLS]
        )
    )

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None

    def get_toolset(self) -> AgentToolset[AgentContext] | None:
        return self.toolset
