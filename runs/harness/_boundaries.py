"""Checkpoint boundaries inside a running stream.

The stream's producer may run ahead of its consumer (the stream buffers items), so an `export_state()` taken
when the Host *sees* an item is not the state at that item. This capability stops the producer right before
each model request and before each tool execution, emits a `checkpoint_boundary` state fact into the stream
and waits until the Host consumer has journaled everything up to that fact and stored the checkpoint. A tool
therefore never runs before the checkpoint holding its call is durable — which is what lets a recovery run
give an unmarked call an unknown result instead of asking the model again and repeating the effect.
At a tool's boundary the gate also says which call it is about to start (`next_dispatch`), so the Host can record
the dispatch in its ledger in the same transaction as the checkpoint instead of waiting for a second one.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic_ai import RunContext, ToolCallPart, ToolDefinition
from pydantic_ai.capabilities import AbstractCapability

from ._events import HarnessEvent, HarnessExtensionEvent, HarnessStreamEvent
from ._tools import is_recovery_retryable

__all__ = ("BOUNDARY_TYPE", "CheckpointBoundaries", "PendingDispatch", "boundary_of")

BOUNDARY_TYPE = "checkpoint_boundary"

Boundary = Literal["model_request", "tool_execution"]


@dataclass(frozen=True)
class PendingDispatch:
    """A tool call a boundary is about to start, and whether its tool declared itself safe to run again."""

    call: ToolCallPart
    recovery_retryable: bool


def boundary_of(item: HarnessStreamEvent[Any], root_run_id: str) -> Boundary | None:
    """The boundary an item of the root run announces, if it is a boundary fact."""
    if not isinstance(item, HarnessEvent) or item.run_id != root_run_id:
        return None
    event = item.event
    if isinstance(event, HarnessExtensionEvent) and event.kind == "state" and event.payload_type == BOUNDARY_TYPE:
        assert isinstance(event.payload, dict)
        match event.payload.get("boundary"):
            case "model_request":
                return "model_request"
            case "tool_execution":
                return "tool_execution"
    return None


@dataclass
class CheckpointBoundaries(AbstractCapability[Any]):
    """Gates the root run at its boundaries until the Host releases them, in order."""

    root_run_id: str = ""
    # One entry per boundary emitted and not released yet, oldest first: the Host handles them in stream order.
    _waiting: deque[tuple[asyncio.Event, PendingDispatch | None]] = field(default_factory=deque, repr=False)

    def bind(self, root_run_id: str) -> None:
        self.root_run_id = root_run_id

    def next_dispatch(self) -> PendingDispatch | None:
        """The tool call the oldest boundary not yet released will start (None at a model request's)."""
        return self._waiting[0][1]

    def release(self) -> None:
        """Let the producer go on past the oldest boundary the Host has handled."""
        self._waiting.popleft()[0].set()

    async def _gate(self, ctx: RunContext[Any], boundary: Boundary, dispatch: PendingDispatch | None = None) -> None:
        if ctx.deps.run_id != self.root_run_id:
            # Inline children are checkpointed inside their parent's state, not on their own.
            return
        released = asyncio.Event()
        self._waiting.append((released, dispatch))
        await ctx.deps.emit(HarnessExtensionEvent(kind="state", payload={"type": BOUNDARY_TYPE, "boundary": boundary}))
        await released.wait()

    async def before_model_request(self, ctx: RunContext[Any], request_context: Any) -> Any:
        await self._gate(ctx, "model_request")
        return request_context

    async def before_tool_execute(
        self, ctx: RunContext[Any], *, call: ToolCallPart, tool_def: ToolDefinition, args: Any
    ) -> Any:
        await self._gate(ctx, "tool_execution", PendingDispatch(call, is_recovery_retryable(tool_def)))
        return args
