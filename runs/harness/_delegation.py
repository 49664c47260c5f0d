"""Inline delegation: a tool that runs a child agent inside the parent's run.

The child is a full Harness run with its own run id and Thread. Every item of its stream except its
terminal result is forwarded into the parent's stream (keeping the child's own numbering), so one root stream
carries the whole delegation. The parent keeps the child's latest state in the `a13n.subagents` namespace,
so the next delegation to the same child continues the child's Thread. Children cannot suspend on deferred
tools (nobody could answer them inside the parent's tool call): their approvals and external calls are
refused inline and the child carries on.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING, Any, TypedDict

from pydantic_ai import RunContext, Tool, ToolFailed

from ._context import AgentContext, RunBindings
from ._errors import HarnessError
from ._events import HarnessRunResultEvent, InlineDelegationPayload
from ._result import HarnessRunResult
from ._state import HarnessState
from ._subagents import SUBAGENTS_NAMESPACE, SUBAGENTS_VERSION, RetainedChild, RetainedChildren

if TYPE_CHECKING:
    from ._agent import ExecutableAgent

__all__ = ("inline_delegation_tool", "run_inline_child")


class _DelegationIds(TypedDict):
    """What every delegation event of one child invocation repeats."""

    invocation_id: str
    child_instance_id: str
    subagent: str
    parent_run_id: str
    parent_agent_instance_id: str
    parent_tool_call_id: str | None


def inline_delegation_tool(
    child: ExecutableAgent[Any],
    *,
    name: str | None = None,
    description: str | None = None,
    instance_id: str | None = None,
) -> Tool[AgentContext]:
    """A tool `delegate_to_<child>(task)` that runs `child` inline and returns its output."""
    child_instance_id = instance_id or child.name

    async def delegate(ctx: RunContext[AgentContext], task: str) -> str:
        return await run_inline_child(ctx, child, task, child_instance_id=child_instance_id)

    return Tool(
        delegate,
        takes_ctx=True,
        name=name or f"delegate_to_{child.name}",
        description=description or f"Hand a task to the {child.name} agent and get its answer.",
    )


async def run_inline_child(
    ctx: RunContext[AgentContext], child: ExecutableAgent[Any], task: str, *, child_instance_id: str
) -> str:
    """Run `child` on `task` inside the current tool call, forwarding its stream into the parent's."""
    parent = ctx.deps
    retained = await parent.state.read(SUBAGENTS_NAMESPACE, RetainedChildren, version=SUBAGENTS_VERSION)
    retained = retained or RetainedChildren()
    record = retained.children.get(child_instance_id)
    previous = record.load_state() if record is not None else HarnessState.new()
    stream = child.stream(
        task,
        bindings=RunBindings(deferred_tools_supported=False, deps=parent.deps),
        previous_state=previous,
    )
    payload: _DelegationIds = {
        "invocation_id": f"delegation-{uuid.uuid4().hex}",
        "child_instance_id": child_instance_id,
        "subagent": child.name,
        "parent_run_id": parent.run_id,
        "parent_agent_instance_id": parent.agent_name,
        "parent_tool_call_id": ctx.tool_call_id,
    }
    parent.register_child(run_id=stream.run_id, thread_id=stream.thread_id)
    result: HarnessRunResult[Any] | None = None
    try:
        async with stream:
            # Emitted by the child, right after its run_started, so observers see the bracket open first.
            await stream.context.emit(
                InlineDelegationPayload(
                    action="started", status="running", child_run_id=stream.run_id, **payload
                ).to_event()
            )
            async for item in stream:
                if isinstance(item, HarnessRunResultEvent):
                    result = item.result
                else:
                    await parent.forward(item)
    except HarnessError as error:
        await _report_failure(parent, payload, error.code, stream.run_id)
        raise ToolFailed(f"The {child.name} agent could not finish ({error.code}).") from error
    except asyncio.CancelledError:
        # The parent run is being cancelled: its terminal closes only its own parts, so the delegation
        # bracket must be closed here or observers would keep the child open forever.
        await _report_failure(parent, payload, "cancelled", stream.run_id)
        raise

    if result is None or result.status != "completed" or result.state is None:
        status = "missing_result" if result is None else result.status
        await _report_failure(parent, payload, status, stream.run_id)
        reason = result.failure.message if result is not None and result.failure is not None else status
        raise ToolFailed(f"The {child.name} agent did not complete: {reason}")

    children = {
        **retained.children,
        child_instance_id: RetainedChild(thread_id=result.thread_id, state=result.state.model_dump(mode="json")),
    }
    await parent.state.write(
        SUBAGENTS_NAMESPACE, retained.model_copy(update={"children": children}), version=SUBAGENTS_VERSION
    )
    await parent.emit(
        InlineDelegationPayload(
            action="completed", status="completed", child_run_id=result.run_id, **payload
        ).to_event()
    )
    output = result.output
    return output if isinstance(output, str) else result.output_json().decode()


async def _report_failure(parent: AgentContext, payload: _DelegationIds, status: str, child_run_id: str) -> None:
    await parent.emit(
        InlineDelegationPayload(action="failed", status=status, child_run_id=child_run_id, **payload).to_event()
    )
