"""The stream observer: a root run with inline children (spec 4.6; scenarios T128–T133)."""

from __future__ import annotations

from typing import Any

import pytest
from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    RunFinishedEvent,
    SubagentErrorEvent,
    SubagentFinishedEvent,
    SubagentStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
)
from pydantic import ValidationError
from pydantic_ai import (
    FunctionToolResultEvent,
    PartDeltaEvent,
    PartEndEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    ToolCallPart,
    ToolReturnPart,
)

from observers.agui import AguiObservationError, HarnessAguiObserver, HarnessAguiStreamObserver
from runs.harness import HarnessExtensionEvent
from tests.support.agui_rules import assert_agui_stream, event_as
from tests.support.factories import SourceRun, history


def types(events: tuple[BaseEvent, ...]) -> list[str]:
    return [event.type.value for event in events]


def root_with_child() -> tuple[list[Any], SourceRun, SourceRun]:
    root = SourceRun("run-root", "thread_root")
    child = SourceRun("run-child", "thread_child", clock_ms=3)
    items = [
        root.started(),
        root.request(0),
        root.item(PartStartEvent(index=0, part=TextPart("Asking a helper."))),
        root.item(PartEndEvent(index=0, part=TextPart("Asking a helper."))),
        root.item(PartEndEvent(index=1, part=ToolCallPart("delegate", {"task": "x"}, tool_call_id="call-d"))),
        child.started(),
        child.delegation("started", child, status="running", parent_run_id="run-root", parent_tool_call_id="call-d"),
        child.request(0),
        child.item(PartStartEvent(index=0, part=TextPart("Child "))),
        child.item(PartDeltaEvent(index=0, delta=TextPartDelta("says hi"))),
        root.delegation("completed", child, status="completed", parent_run_id="run-root", parent_tool_call_id="call-d"),
        root.item(FunctionToolResultEvent(ToolReturnPart("delegate", "Child says hi", "call-d"))),
        root.completed("done"),
    ]
    return items, root, child


def test_inline_child_projection() -> None:
    items, _, _ = root_with_child()
    observer = HarnessAguiStreamObserver()
    outputs = [observer.observe(item) for item in items]

    assert outputs[5] == ()
    started, custom = outputs[6]
    assert isinstance(started, SubagentStartedEvent)
    assert (started.subagent_run_id, started.name, started.parent_tool_call_id) == ("run-child", "researcher", "call-d")
    assert started.parent_subagent_run_id is None
    assert isinstance(custom, CustomEvent) and custom.name == "a13n.harness.delegation"
    assert custom.subagent_run_id == "run-child"

    child_text = outputs[8] + outputs[9]
    assert types(child_text) == ["TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_CONTENT"]
    start = event_as(TextMessageStartEvent, child_text[0])
    contents = [event_as(TextMessageContentEvent, event) for event in child_text[1:]]
    assert {start.subagent_run_id, *(event.subagent_run_id for event in contents)} == {"run-child"}
    assert start.message_id == "run-child:request-0:part-0:text"

    end, finished, completion = outputs[10]
    assert isinstance(end, TextMessageEndEvent) and end.subagent_run_id == "run-child"
    assert end.message_id == "run-child:request-0:part-0:text"
    assert isinstance(finished, SubagentFinishedEvent) and finished.subagent_run_id == "run-child"
    assert finished.outcome is not None and finished.outcome.type == "success"
    assert isinstance(completion, CustomEvent) and completion.subagent_run_id is None

    assert types(outputs[-1]) == ["RUN_FINISHED"]
    assert event_as(RunFinishedEvent, outputs[-1][0]).run_id == "run-root"
    assert (observer.thread_id, observer.run_id) == ("thread_root", "run-root")
    assert_agui_stream(observer.snapshot(), complete=True)


def test_failed_delegation() -> None:
    root = SourceRun("run-root", "thread_root")
    child = SourceRun("run-child", "thread_child")
    observer = HarnessAguiStreamObserver()
    observer.observe(root.started())
    observer.observe(child.started())
    observer.observe(child.delegation("started", child, status="running", parent_run_id="run-root"))
    error, custom = observer.observe(
        root.delegation("failed", child, status="state_rejected", parent_run_id="run-root")
    )
    assert isinstance(error, SubagentErrorEvent)
    assert (error.subagent_run_id, error.code, error.message) == (
        "run-child",
        "state_rejected",
        "Inline delegation state_rejected.",
    )
    assert isinstance(custom, CustomEvent) and custom.subagent_run_id is None

    (only,) = observer.observe(root.delegation("failed", None, status="child_not_started", parent_run_id="run-root"))
    assert isinstance(only, CustomEvent) and only.name == "a13n.harness.delegation"
    assert only.subagent_run_id is None


def test_invalid_delegation_payload_fails_with_pydantics_error() -> None:
    root = SourceRun("run-root", "thread_root")
    observer = HarnessAguiStreamObserver()
    observer.observe(root.started())
    bad = root.item(HarnessExtensionEvent(kind="delegation", payload={"type": "inline_delegation", "action": "x"}))
    with pytest.raises(ValidationError):
        observer.observe(bad)
    assert observer.event_count == 1


def test_nested_grandchild() -> None:
    root = SourceRun("run-root", "thread_root")
    child = SourceRun("run-child", "thread_child")
    grandchild = SourceRun("run-grand", "thread_grand")
    observer = HarnessAguiStreamObserver()
    observer.observe(root.started())
    observer.observe(child.started())
    observer.observe(child.delegation("started", child, status="running", parent_run_id="run-root"))
    observer.observe(grandchild.started())
    started, custom = observer.observe(
        grandchild.delegation("started", grandchild, status="running", parent_run_id="run-child")
    )
    assert isinstance(started, SubagentStartedEvent)
    assert (started.subagent_run_id, started.parent_subagent_run_id) == ("run-grand", "run-child")
    assert event_as(CustomEvent, custom).subagent_run_id == "run-grand"
    text = observer.observe(grandchild.item(PartEndEvent(index=0, part=TextPart("deep"))))
    texts = [
        event
        for event in text
        if isinstance(event, TextMessageStartEvent | TextMessageContentEvent | TextMessageEndEvent)
    ]
    assert texts == list(text) and {event.subagent_run_id for event in texts} == {"run-grand"}
    finished, completion = observer.observe(
        child.delegation("completed", grandchild, status="completed", parent_run_id="run-child")
    )
    assert isinstance(finished, SubagentFinishedEvent) and finished.subagent_run_id == "run-grand"
    # The completion fact was emitted by the child run, so it belongs to the child.
    assert event_as(CustomEvent, completion).subagent_run_id == "run-child"


def test_known_child_changing_thread() -> None:
    items, _, _ = root_with_child()
    observer = HarnessAguiStreamObserver()
    for item in items[:7]:
        observer.observe(item)
    impostor = SourceRun("run-child", "thread_other")
    impostor.sequence = 5
    count = observer.event_count
    with pytest.raises(AguiObservationError, match="thread correlation"):
        observer.observe(impostor.item(PartDeltaEvent(index=0, delta=TextPartDelta("x"))))
    assert observer.event_count == count


async def test_resume_inside_an_open_child_part_then_live() -> None:
    items, _, _ = root_with_child()
    live = HarnessAguiStreamObserver()
    live_outputs = [live.observe(item) for item in items]
    for split in range(len(items) + 1):
        observer = HarnessAguiStreamObserver()
        await observer.resume(history(items[:split]))
        assert list(observer.snapshot()) == [event for output in live_outputs[:split] for event in output]
        assert [observer.observe(item) for item in items[split:]] == live_outputs[split:]
        assert observer.snapshot() == live.snapshot()


def test_root_terminal_closes_only_root_parts() -> None:
    root = SourceRun("run-root", "thread_root")
    child = SourceRun("run-child", "thread_child")
    observer = HarnessAguiStreamObserver()
    observer.observe(root.started())
    observer.observe(root.item(PartStartEvent(index=0, part=TextPart("root text"))))
    observer.observe(child.started())
    observer.observe(child.delegation("started", child, status="running", parent_run_id="run-root"))
    observer.observe(child.item(PartStartEvent(index=0, part=TextPart("child text"))))
    end, finished = observer.observe(root.completed())
    assert isinstance(end, TextMessageEndEvent)
    assert (end.message_id, end.subagent_run_id) == ("run-root:request-0:part-0:text", None)
    assert finished.type.value == "RUN_FINISHED"
    closing = observer.observe(root.delegation("completed", child, status="completed", parent_run_id="run-root"))
    assert types(closing)[:2] == ["TEXT_MESSAGE_END", "SUBAGENT_FINISHED"]
    assert event_as(TextMessageEndEvent, closing[0]).subagent_run_id == "run-child"


def test_child_run_lifecycle_events_are_dropped() -> None:
    root = SourceRun("run-root", "thread_root")
    child = SourceRun("run-child", "thread_child")
    observer = HarnessAguiStreamObserver()
    observer.observe(root.started())
    observer.observe(child.started())
    observer.observe(child.item(PartStartEvent(index=0, part=TextPart("open"))))
    # A child terminal is normally consumed by the parent; if one arrives it only closes the child's parts.
    (end,) = observer.observe(child.failed())
    assert isinstance(end, TextMessageEndEvent) and end.subagent_run_id == "run-child"


def test_single_run_observer_rejects_child_items() -> None:
    items, _, _ = root_with_child()
    observer = HarnessAguiObserver()
    for item in items[:5]:
        observer.observe(item)
    # Children have threads of their own, so the thread check (which comes first) already trips.
    with pytest.raises(AguiObservationError, match="correlation changed"):
        observer.observe(items[5])
