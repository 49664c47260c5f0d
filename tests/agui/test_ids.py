"""AG-UI ids: repeated provider ids get suffixes, children are namespaced, and every reference follows."""

from __future__ import annotations

from typing import Any

from ag_ui.core import SubagentStartedEvent, TextMessageStartEvent, ToolCallResultEvent, ToolCallStartEvent
from pydantic_ai import FunctionToolResultEvent, PartEndEvent, TextPart, ToolCallPart, ToolReturnPart

from observers.agui import HarnessAguiStreamObserver
from tests.support.agui_rules import assert_agui_stream, events_of, interrupts_of
from tests.support.factories import SourceRun, history


def response(run: SourceRun, index: int, *parts: Any) -> list[Any]:
    return [run.request(index), *(run.item(PartEndEvent(index=n, part=part)) for n, part in enumerate(parts))]


def answered(run: SourceRun, call: ToolCallPart) -> Any:
    return run.item(FunctionToolResultEvent(ToolReturnPart(call.tool_name, "ok", call.tool_call_id)))


async def test_calls_numbered_per_response_get_unique_ids_that_results_and_interrupts_follow() -> None:
    root = SourceRun("run-root", "thread_root")
    lookup = ToolCallPart("lookup", {"id": 1}, tool_call_id="call_0")
    deploy = ToolCallPart("deploy", {"v": 2}, tool_call_id="call_0")
    items = [
        root.started(),
        *response(root, 0, TextPart("checking", id="msg_0"), lookup),
        answered(root, lookup),
        *response(root, 1, TextPart("deploying", id="msg_0"), deploy),
        root.suspended(approvals=[deploy]),
    ]
    observer = HarnessAguiStreamObserver()
    events = [event for item in items for event in observer.observe(item)]
    assert_agui_stream(events, complete=True, calls_seen=True)

    starts = [event.tool_call_id for event in events if isinstance(event, ToolCallStartEvent)]
    texts = [event.message_id for event in events if isinstance(event, TextMessageStartEvent)]
    (result,) = [event for event in events if isinstance(event, ToolCallResultEvent)]
    (interrupt,) = interrupts_of(events[-1])
    assert starts == ["call_0", "call_0~2"] and texts == ["msg_0", "msg_0~2"]
    assert (result.tool_call_id, result.message_id) == ("call_0", "call_0:result")
    # The interrupt is answered by the source id; it points at the call the stream showed for it.
    assert (interrupt.id, interrupt.tool_call_id) == ("call_0", "call_0~2")

    rebuilt = HarnessAguiStreamObserver()
    await rebuilt.resume(history(items))
    assert list(rebuilt.snapshot()) == events


def test_a_child_reusing_its_parents_ids_is_namespaced_and_nested_under_the_parents_call() -> None:
    root, child = SourceRun("run-root", "thread_root"), SourceRun("run-child", "thread_child")
    delegate = ToolCallPart("delegate", {}, tool_call_id="call_0")
    inner = ToolCallPart("lookup", {}, tool_call_id="call_0")
    items = [
        root.started(),
        *response(root, 0, delegate),
        child.started(),
        child.delegation("started", child, status="running", parent_run_id="run-root", parent_tool_call_id="call_0"),
        *response(child, 0, TextPart("looking", id="msg_0"), inner),
        answered(child, inner),
        child.completed(),
        root.delegation("completed", child, status="completed", parent_run_id="run-root", parent_tool_call_id="call_0"),
        answered(root, delegate),
        root.completed(),
    ]
    observer = HarnessAguiStreamObserver()
    events = [event for item in items for event in observer.observe(item)]
    assert_agui_stream(events, complete=True, calls_seen=True)
    (started,) = events_of(SubagentStartedEvent, events)
    assert started.parent_tool_call_id == "call_0"
    child_ids = {
        getattr(event, field, None)
        for event in events
        if getattr(event, "subagent_run_id", None) == "run-child"
        for field in ("tool_call_id", "message_id")
    } - {None}
    assert child_ids == {"run-child/call_0", "run-child/msg_0", "run-child/call_0:result"}
