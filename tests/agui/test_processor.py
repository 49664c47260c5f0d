"""The processor hook (spec 4.7; scenarios T106–T112)."""

from __future__ import annotations

from typing import Any

import pytest
from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    RunErrorEvent,
    RunFinishedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    ToolCallArgsEvent,
    ToolCallResultEvent,
)
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

from observers.agui import FRAGMENT_EVENT_NAME, AguiObservationError, HarnessAguiObserver
from runs.harness import HarnessExtensionEvent
from tests.support.agui_rules import event_as
from tests.support.factories import SourceRun


def redact(item: Any, event: BaseEvent) -> BaseEvent:
    """Rewrites every content field the contract lets a processor touch."""
    if isinstance(event, TextMessageContentEvent | ToolCallArgsEvent):
        event.delta = "[redacted]"
    elif isinstance(event, ToolCallResultEvent):
        event.content = "[redacted]"
    elif isinstance(event, RunFinishedEvent):
        event.result = "[redacted]"
    elif isinstance(event, RunErrorEvent):
        event.message = "[redacted]"
    return event


class Switchable:
    """A processor the test can swap, as a Host would by deploying a fixed version."""

    def __init__(self, processor: Any = None) -> None:
        self.processor = processor

    def __call__(self, item: Any, event: BaseEvent) -> Any:
        return event if self.processor is None else self.processor(item, event)


def observed(processor: Any) -> tuple[HarnessAguiObserver, SourceRun, Switchable]:
    run = SourceRun()
    switch = Switchable(processor)
    observer = HarnessAguiObserver(processor=switch)
    observer.observe(run.started())
    observer.observe(run.item(PartStartEvent(index=0, part=TextPart(""))))
    return observer, run, switch


def test_content_changes_are_kept() -> None:
    observer, run, _switch = observed(redact)
    (content,) = observer.observe(run.item(PartDeltaEvent(index=0, delta=TextPartDelta("secret"))))
    assert isinstance(content, TextMessageContentEvent) and content.delta == "[redacted]"
    assert observer.snapshot()[-1] == content
    tool = observer.observe(run.item(PartEndEvent(index=1, part=ToolCallPart("t", {"k": "v"}, tool_call_id="c1"))))
    assert event_as(ToolCallArgsEvent, tool[1]).delta == "[redacted]"
    (result,) = observer.observe(run.item(FunctionToolResultEvent(ToolReturnPart("t", "secret", "c1"))))
    assert event_as(ToolCallResultEvent, result).content == "[redacted]"
    finished = observer.observe(run.completed("secret"))
    assert event_as(RunFinishedEvent, finished[-1]).result == "[redacted]"

    failing = SourceRun(run_id="run-2")
    error_observer = HarnessAguiObserver(processor=redact)
    (error,) = error_observer.observe(failing.failed("boom", "secret"))
    assert isinstance(error, RunErrorEvent) and (error.message, error.code) == ("[redacted]", "boom")


def _set(field: str, value: Any) -> Any:
    def processor(item: Any, event: BaseEvent) -> BaseEvent:
        if isinstance(event, TextMessageContentEvent | CustomEvent):
            setattr(event, field, value)
        return event

    return processor


@pytest.mark.parametrize(
    "processor",
    [
        _set("message_id", "other"),
        _set("timestamp", 1),
        _set("metadata", {"added": True}),
        _set("subagent_run_id", "child"),
        _set("raw_event", {"x": 1}),
    ],
    ids=["message_id", "timestamp", "metadata", "attribution", "raw_event"],
)
def test_structural_changes_are_rejected_and_nothing_accumulates(processor: Any) -> None:
    observer, run, switch = observed(None)
    switch.processor = processor
    item = run.item(PartDeltaEvent(index=0, delta=TextPartDelta("a")))
    before = observer.snapshot()
    with pytest.raises(AguiObservationError, match="structural"):
        observer.observe(item)
    assert observer.snapshot() == before
    # The same item, retried from the same state without the bad processor, converts normally.
    switch.processor = None
    assert [event.type.value for event in observer.observe(item)] == ["TEXT_MESSAGE_CONTENT"]


def test_custom_values_are_immutable() -> None:
    def rewrite(item: Any, event: BaseEvent) -> BaseEvent:
        if isinstance(event, CustomEvent):
            event.value = {**event.value, "event": "hidden"}
        return event

    run = SourceRun()
    observer = HarnessAguiObserver(processor=rewrite)
    with pytest.raises(AguiObservationError):
        observer.observe(run.item(HarnessExtensionEvent(kind="diagnostic", payload={"a": 1})))
    assert observer.run_id is None and observer.event_count == 0


def test_type_changes_and_foreign_objects_are_rejected() -> None:
    def retype(item: Any, event: BaseEvent) -> Any:
        if isinstance(event, TextMessageContentEvent):
            return TextMessageEndEvent(message_id=event.message_id, timestamp=event.timestamp)
        return event

    observer, run, switch = observed(retype)
    with pytest.raises(AguiObservationError, match="type"):
        observer.observe(run.item(PartDeltaEvent(index=0, delta=TextPartDelta("a"))))

    switch.processor = lambda item, event: {"type": "TEXT_MESSAGE_CONTENT"}
    with pytest.raises(AguiObservationError, match="not an AG-UI event"):
        observer.observe(run.item(PartDeltaEvent(index=0, delta=TextPartDelta("a"))))


def test_invalid_content_is_rejected() -> None:
    def corrupt(item: Any, event: BaseEvent) -> BaseEvent:
        if isinstance(event, TextMessageContentEvent):
            event.delta = 42  # type: ignore[assignment]  # a wrong type is what this processor is for
        return event

    observer, run, _switch = observed(corrupt)
    with pytest.raises(AguiObservationError, match="invalid"):
        observer.observe(run.item(PartDeltaEvent(index=0, delta=TextPartDelta("a"))))


def test_dropping_events() -> None:
    def no_diagnostics(item: Any, event: BaseEvent) -> BaseEvent | None:
        if isinstance(event, CustomEvent) and event.name == "a13n.harness.diagnostic":
            return None
        return event

    run = SourceRun()
    observer = HarnessAguiObserver(processor=no_diagnostics)
    reference = HarnessAguiObserver()
    items = [
        run.started(),
        run.item(HarnessExtensionEvent(kind="diagnostic", payload={"a": 1})),
        run.item(PartEndEvent(index=0, part=TextPart("hello"))),
        run.item(HarnessExtensionEvent(kind="state", payload={"b": 2})),
    ]
    outputs = [observer.observe(item) for item in items]
    assert outputs[1] == ()
    expected = [event for item in items for event in reference.observe(item)]
    assert observer.snapshot() == tuple(
        event for event in expected if not (isinstance(event, CustomEvent) and event.name == "a13n.harness.diagnostic")
    )


def test_processor_errors_propagate_unchanged() -> None:
    def broken(item: Any, event: BaseEvent) -> BaseEvent:
        raise RuntimeError("processor bug")

    run = SourceRun()
    observer = HarnessAguiObserver(processor=broken)
    with pytest.raises(RuntimeError, match="processor bug"):
        observer.observe(run.started())
    assert (observer.thread_id, observer.run_id, observer.event_count) == (None, None, 0)


def test_in_place_mutation_is_compared_against_the_observers_copy() -> None:
    seen: list[BaseEvent] = []

    def sneaky(item: Any, event: BaseEvent) -> BaseEvent:
        seen.append(event)
        if isinstance(event, TextMessageContentEvent):
            event.message_id = "changed"
        return event

    observer, run, switch = observed(sneaky)
    with pytest.raises(AguiObservationError):
        observer.observe(run.item(PartDeltaEvent(index=0, delta=TextPartDelta("a"))))
    # What the processor got and kept is its own copy: the observer's later output is unaffected.
    switch.processor = None
    (content,) = observer.observe(run.item(PartDeltaEvent(index=0, delta=TextPartDelta("a"))))
    assert event_as(TextMessageContentEvent, content).message_id == "run-1:request-0:part-0:text"
    assert event_as(TextMessageContentEvent, seen[-1]).message_id == "changed"


def test_processor_sees_oversized_customs_whole() -> None:
    sizes: list[int] = []

    def drop_big(item: Any, event: BaseEvent) -> BaseEvent | None:
        if isinstance(event, CustomEvent):
            assert event.name != FRAGMENT_EVENT_NAME
            sizes.append(len(event.model_dump_json()))
            return None
        return event

    run = SourceRun()
    observer = HarnessAguiObserver(processor=drop_big)
    observer.observe(run.started())
    assert observer.observe(run.item(HarnessExtensionEvent(kind="diagnostic", payload={"blob": "x" * 60_000}))) == ()
    assert sizes and sizes[0] > 60_000
    assert observer.event_count == 1


def test_a_processor_keeping_its_events_cannot_change_the_projection() -> None:
    kept: list[BaseEvent] = []

    def keep(item: Any, event: BaseEvent) -> BaseEvent:
        kept.append(event)
        return event

    run = SourceRun()
    observer = HarnessAguiObserver(processor=keep)
    observer.observe(run.started())
    observer.observe(run.item(HarnessExtensionEvent(kind="state", payload={"step": 1})))
    observer.observe(run.item(PartEndEvent(index=0, part=TextPart("hello"))))
    before = observer.snapshot()
    for event in kept:
        if isinstance(event, CustomEvent):
            event.value["event"]["payload"]["step"] = 2
        if isinstance(event, TextMessageContentEvent):
            event.delta = "changed later"
    assert observer.snapshot() == before
