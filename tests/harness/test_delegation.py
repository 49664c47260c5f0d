"""Inline child runs inside a root stream (spec 4.2, 4.3, 5.10 T87)."""

from __future__ import annotations

import asyncio

from pydantic_ai import ModelResponse, PartStartEvent, RunContext, TextPart, Tool, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import FunctionModel

from runs.harness import (
    DEFERRED_UNAVAILABLE_MESSAGE,
    SUBAGENTS_NAMESPACE,
    AgentContext,
    AgentDefinition,
    HarnessEvent,
    HarnessExtensionEvent,
    HarnessRunResultEvent,
    HarnessState,
    RetainedChildren,
    RunError,
    inline_delegation_tool,
    scripted_model,
)
from tests.support.factories import now, run_started_event
from tests.support.harness_streams import call_then_echo, collect


def _child_script(messages, info):
    prompts = [p.content for m in messages for p in m.parts if p.part_kind == "user-prompt"]
    return ModelResponse(parts=[TextPart(f"child handled {prompts}")])


def _parent_script(messages, info):
    returns = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
    if returns:
        return ModelResponse(parts=[TextPart(f"parent got: {returns[0].content} ({returns[0].outcome})")])
    return ModelResponse(parts=[ToolCallPart("delegate_to_researcher", {"task": "find facts"}, "d1")])


def _root(child_model=None):
    child = AgentDefinition(name="researcher", model=child_model or scripted_model(_child_script)).build()
    return AgentDefinition(
        name="lead", model=scripted_model(_parent_script), tools=[inline_delegation_tool(child)]
    ).build()


def _delegation(item):
    event = getattr(item, "event", None)
    if isinstance(event, HarnessExtensionEvent) and event.kind == "delegation":
        return event.payload
    return None


async def test_child_items_are_forwarded_with_their_own_numbering():
    """T87: child items keep the child's ids and sequences; root sequences stay contiguous."""
    stream = _root().stream("research this", previous_state=HarnessState.new(thread_id="thr_lead1"))
    items = await collect(stream)

    root = [item for item in items if item.run_id == stream.run_id]
    child = [item for item in items if item.run_id != stream.run_id]
    assert [item.sequence for item in root] == list(range(len(root)))
    assert isinstance(root[-1], HarnessRunResultEvent)
    assert root[-1].result.output == "parent got: child handled ['find facts'] (success)"

    assert child, "the child run was not forwarded"
    assert not any(isinstance(item, HarnessRunResultEvent) for item in child)
    assert all(isinstance(item, HarnessEvent) for item in child)
    assert len({item.run_id for item in child}) == 1
    assert {item.thread_id for item in child} != {"thr_lead1"}
    assert [item.sequence for item in child] == list(range(len(child)))
    assert child[0].event == run_started_event()
    started = _delegation(child[1])
    assert started["action"] == "started"
    assert started["child_run_id"] == child[0].run_id
    assert started["parent_run_id"] == stream.run_id
    assert started["parent_tool_call_id"] == "d1"

    completed = [payload for item in root if (payload := _delegation(item))]
    assert [payload["action"] for payload in completed] == ["completed"]
    assert completed[0]["invocation_id"] == started["invocation_id"]


async def test_child_thread_is_retained_and_continued():
    executable = _root()
    first = await executable.run("research", previous_state=HarnessState.new(thread_id="thr_lead2"))
    second = await executable.run("again", previous_state=first.state)

    assert second.output == "parent got: child handled ['find facts', 'find facts'] (success)"
    retained = RetainedChildren.model_validate(second.state.agent_context_state.get(SUBAGENTS_NAMESPACE).data)
    record = retained.children["researcher"]
    assert record.load_state().thread_id == record.thread_id != "thr_lead2"


async def test_children_cannot_suspend_on_deferred_tools():
    """S72/T69: children run with deferred_tools_supported=False, so their approvals are refused inline."""

    def child_script(messages, info):
        returns = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
        if returns:
            return ModelResponse(parts=[TextPart(f"child saw {returns[0].outcome}: {returns[0].content}")])
        return ModelResponse(parts=[ToolCallPart("dangerous", {}, "x1")])

    ran = []

    def dangerous() -> str:
        ran.append("dangerous")
        return "did it"

    child = AgentDefinition(
        name="researcher", model=scripted_model(child_script), tools=[Tool(dangerous, requires_approval=True)]
    ).build()
    executable = AgentDefinition(
        name="lead", model=scripted_model(_parent_script), tools=[inline_delegation_tool(child)]
    ).build()
    stream = executable.stream("research")
    items = await collect(stream)

    result = items[-1].result
    assert result.status == "completed" and ran == []
    assert result.output == f"parent got: child saw denied: {DEFERRED_UNAVAILABLE_MESSAGE} (success)"
    actions = [payload["action"] for item in items if (payload := _delegation(item))]
    assert actions == ["started", "completed"]


async def test_only_registered_children_can_be_forwarded():
    """§4.2: the parent refuses items of runs it did not start and sequences that do not increase."""

    async def tamper(ctx: RunContext[AgentContext]) -> str:
        stranger = HarnessEvent("thr_other1", "run-stranger", 0, now(), run_started_event())
        codes = []
        try:
            await ctx.deps.forward(stranger)
        except RunError as error:
            codes.append(error.code)
        ctx.deps.register_child(run_id="run-child", thread_id="thr_child9")
        first = HarnessEvent("thr_child9", "run-child", 0, now(), run_started_event())
        await ctx.deps.forward(first)
        try:
            await ctx.deps.forward(first)
        except RunError as error:
            codes.append(error.code)
        return ",".join(codes)

    script = call_then_echo("tamper", "t1")
    result = await AgentDefinition(model=scripted_model(script), tools=[tamper]).build().run("go")
    assert result.output == "event_run_mismatch,event_sequence_invalid"


async def test_cancelling_the_parent_while_the_child_runs_closes_the_delegation():
    """A cancelled root still reports its child as ended, so observers close the child's lane."""
    blocked = asyncio.Event()

    async def blocking_child(messages, info):
        yield "child starts"
        await blocked.wait()

    stream = _root(FunctionModel(stream_function=blocking_child)).stream("research")
    items = []
    async with stream:
        async for item in stream:
            items.append(item)
            if item.run_id != stream.run_id and isinstance(getattr(item, "event", None), PartStartEvent):
                stream.cancel()

    assert items[-1].result.status == "cancelled"
    facts = [payload for item in items if (payload := _delegation(item))]
    assert [(fact["action"], fact["status"]) for fact in facts] == [("started", "running"), ("failed", "cancelled")]
    assert facts[1]["child_run_id"] == facts[0]["child_run_id"]


async def test_leaving_the_stream_while_a_child_fills_the_queue_does_not_hang():
    """Teardown cancels the parent inside a blocked forward; reporting the child's end must not wait for room."""

    async def chatty_child(messages, info):
        for number in range(500):
            yield f"w{number} "

    async def consume_then_leave() -> None:
        stream = _root(FunctionModel(stream_function=chatty_child)).stream("research")
        async with stream:
            async for item in stream:
                if item.run_id != stream.run_id:
                    # The queue offers no event for "full"; the producer fills it while this consumer waits.
                    while not stream._queue.full():  # noqa: ASYNC110
                        await asyncio.sleep(0.01)
                    break
        assert stream.result is None and stream.outcome is None

    # A deadlock guard, not a timing check: the exit takes milliseconds when it works.
    await asyncio.wait_for(consume_then_leave(), timeout=30)
