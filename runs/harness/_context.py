"""Per-run authority and context.

`RunBindings` is what the Host grants one run (model override, whether deferred tools can suspend, its own
dependencies); nothing of it is ever stored in `HarnessState`. `AgentContext` is the run-local object tools
and capabilities reach as `ctx.deps`: the Thread and run identity, capability state, the run's shell
observation, event emission and run-scoped cleanups.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic_ai.models import Model

from ._capability_state import AgentContextState
from ._errors import RunError
from ._events import AgentStreamEventProtocol, HarnessEvent, is_run_started

if TYPE_CHECKING:
    from ._run_shell import RunShell
    from ._stream import HarnessRunStream

__all__ = ("AgentContext", "RunBindings")


@dataclass(frozen=True, kw_only=True)
class RunBindings:
    """Fresh authority for one run, supplied by the Host.

    `model` overrides the definition's model for this run only; `deferred_tools_supported=False` is for
    Hosts (and inline children) without a deferred lifecycle: every approval or external call is then
    refused inline (the model sees `DEFERRED_UNAVAILABLE_MESSAGE`) and the run never suspends; `deps` is
    whatever the Host's own tools need.
    """

    model: Model | str | None = None
    deferred_tools_supported: bool = True
    deps: Any = None

    @classmethod
    def embedded(cls, **changes: Any) -> RunBindings:
        """Bindings for an application that embeds the harness directly."""
        return cls(**changes)


@dataclass(frozen=True, eq=False)
class AgentContext:
    """The run-local context; `ctx.deps` of every tool and capability hook in a Harness run."""

    thread_id: str
    run_id: str
    agent_name: str
    bindings: RunBindings
    state: AgentContextState
    _stream: HarnessRunStream[Any] = field(repr=False)
    shell: RunShell | None = None
    """This run's observation of its shell environment, if the Host gave the run one."""
    _cleanups: AsyncExitStack = field(default_factory=AsyncExitStack, repr=False)

    @property
    def deps(self) -> Any:
        return self.bindings.deps

    @property
    def run_shell(self) -> RunShell:
        if self.shell is None:
            raise RunError("this run has no shell environment", code="shell_unavailable")
        return self.shell

    async def emit(self, event: AgentStreamEventProtocol) -> None:
        """Publish an event into this run's stream (after the items produced so far)."""
        if is_run_started(event):
            raise RunError("only the harness announces that a run started", code="event_invalid")
        kind = getattr(event, "event_kind", None)
        if not isinstance(kind, str) or not kind.strip():
            raise RunError("stream events need a non-blank event_kind", code="event_invalid")
        await self._stream._publish(event)

    async def forward(self, item: HarnessEvent) -> None:
        """Forward an item of an inline child run registered with `register_child`."""
        await self._stream._forward(item)

    def register_child(self, *, run_id: str, thread_id: str) -> None:
        self._stream._register_child(run_id=run_id, thread_id=thread_id)

    def add_cleanup(self, callback: Callable[[], Awaitable[Any]]) -> None:
        """Run `callback` when the run is torn down (last registered, first run)."""
        self._cleanups.push_async_callback(callback)
