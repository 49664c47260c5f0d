"""Observer conversion (spec 4.4, 4.5, 4.8; scenarios T91–T105)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    EventType,
    ImagePart,
    ReasoningEncryptedValueEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageStartEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    TokenUsage,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from ag_ui.core import (
    TextPart as AguiTextPart,
)
from pydantic_ai import (
    BinaryContent,
    CapabilityEvent,
    DeferredToolResults,
    FunctionToolResultEvent,
    PartDeltaEvent,
    PartEndEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    ThinkingPart,
    ThinkingPartDelta,
    ToolCallPart,
    ToolCallPartDelta,
    ToolReturnPart,
)
from pydantic_ai.messages import CustomEvent as NativeCustomEvent
from pydantic_ai.messages import DeferredToolResultsEvent, EnqueuedMessagesEvent, FinalResultEvent

from observers.agui import (
    AUTHORED_INPUT_EVENT_NAMES,
    FRAGMENT_EVENT_NAME,
    AguiObservationError,
    CustomEventAssembler,
    HarnessAguiObserver,
)
from runs.harness import HarnessExtensionEvent, InputSource, InputTextEvent
from tests.support.agui_rules import assert_agui_stream, event_as
from tests.support.factories import SourceRun


def types(events: tuple[BaseEvent, ...] | list[BaseEvent]) -> list[str]:
    return [event.type.value for event in events]


@pytest.fixture
def run() -> SourceRun:
    return SourceRun()


@pytest.fixture
def observer(run: SourceRun) -> HarnessAguiObserver:
    observer = HarnessAguiObserver()
    observer.observe(run.started())
    return observer


def test_run_started(run: SourceRun) -> None:
    observer = HarnessAguiObserver()
    item = run.started()
    (event,) = observer.observe(item)
    assert event == RunStartedEvent(
        thread_id="thread_1",
        run_id="run-1",
        protocol_version="1.0",
        timestamp=int(item.occurred_at.timestamp() * 1000),
    )
    assert (observer.thread_id, observer.run_id, observer.event_count) == ("thread_1", "run-1", 1)


def test_text_start_deltas_end(run: SourceRun, observer: HarnessAguiObserver) -> None:
    outputs = [
        observer.observe(run.item(PartStartEvent(index=0, part=TextPart("")))),
        observer.observe(run.item(PartDeltaEvent(index=0, delta=TextPartDelta("a")))),
        observer.observe(run.item(PartDeltaEvent(index=0, delta=TextPartDelta("b")))),
        observer.observe(run.item(PartEndEvent(index=0, part=TextPart("ab")))),
    ]
    message_id = "run-1:request-0:part-0:text"
    assert [[event.model_dump(exclude={"timestamp"}) for event in output] for output in outputs] == [
        [TextMessageStartEvent(message_id=message_id, role="assistant").model_dump()],
        [TextMessageContentEvent(message_id=message_id, delta="a").model_dump()],
        [TextMessageContentEvent(message_id=message_id, delta="b").model_dump()],
        [TextMessageEndEvent(message_id=message_id).model_dump()],
    ]


def test_text_start_with_content_emits_it(run: SourceRun, observer: HarnessAguiObserver) -> None:
    started = observer.observe(run.item(PartStartEvent(index=0, part=TextPart("Hel"))))
    ended = observer.observe(run.item(PartEndEvent(index=0, part=TextPart("Hel"))))
    assert types(started) == ["TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT"]
    assert types(ended) == ["TEXT_MESSAGE_END"]


def test_text_end_without_start(run: SourceRun, observer: HarnessAguiObserver) -> None:
    events = observer.observe(run.item(PartEndEvent(index=3, part=TextPart("whole"))))
    assert types(events) == ["TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END"]
    assert event_as(TextMessageContentEvent, events[1]).delta == "whole"


def test_text_delta_without_start_opens_the_message(run: SourceRun, observer: HarnessAguiObserver) -> None:
    events = observer.observe(run.item(PartDeltaEvent(index=0, delta=TextPartDelta("x"))))
    assert types(events) == ["TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT"]
    end = observer.observe(run.item(PartEndEvent(index=0, part=TextPart("x"))))
    assert types(end) == ["TEXT_MESSAGE_END"]


def test_empty_text_delta_is_only_a_custom(run: SourceRun, observer: HarnessAguiObserver) -> None:
    (event,) = observer.observe(run.item(PartDeltaEvent(index=0, delta=TextPartDelta(""))))
    assert isinstance(event, CustomEvent) and event.name == "a13n.pydantic_ai.part_delta"
    assert event.value["event"] == {
        "index": 0,
        "delta": {
            "content_delta": "",
            "provider_name": None,
            "provider_details": None,
            "citations_delta": None,
            "part_delta_kind": "text",
        },
        "event_kind": "part_delta",
    }


def test_message_ids_follow_the_request_index(run: SourceRun, observer: HarnessAguiObserver) -> None:
    observer.observe(run.request(2))
    generated = observer.observe(run.item(PartStartEvent(index=0, part=TextPart("a"))))
    provided = observer.observe(run.item(PartStartEvent(index=1, part=TextPart("b", id="msg_1"))))
    assert event_as(TextMessageStartEvent, generated[0]).message_id == "run-1:request-2:part-0:text"
    assert event_as(TextMessageStartEvent, provided[0]).message_id == "msg_1"


def test_an_open_part_keeps_its_id_across_requests(run: SourceRun, observer: HarnessAguiObserver) -> None:
    observer.observe(run.item(PartStartEvent(index=0, part=TextPart("a"))))
    observer.observe(run.request(1))
    (end,) = observer.observe(run.item(PartEndEvent(index=0, part=TextPart("a"))))
    assert event_as(TextMessageEndEvent, end).message_id == "run-1:request-0:part-0:text"


def test_thinking_start_with_content_and_signature(run: SourceRun, observer: HarnessAguiObserver) -> None:
    started = observer.observe(run.item(PartStartEvent(index=0, part=ThinkingPart("hmm", id="rs_1", signature="s"))))
    ended = observer.observe(run.item(PartEndEvent(index=0, part=ThinkingPart("hmm", id="rs_1", signature="s"))))
    message_id = "run-1:request-0:part-0:reasoning"
    assert [event.model_dump(exclude={"timestamp"}) for event in started] == [
        ReasoningMessageStartEvent(message_id=message_id).model_dump(),
        ReasoningMessageContentEvent(message_id=message_id, delta="hmm").model_dump(),
        ReasoningEncryptedValueEvent(subtype="message", entity_id=message_id, encrypted_value="s").model_dump(),
    ]
    assert types(ended) == ["REASONING_MESSAGE_END"]


def test_thinking_deltas_and_late_signature(run: SourceRun, observer: HarnessAguiObserver) -> None:
    first = observer.observe(run.item(PartDeltaEvent(index=0, delta=ThinkingPartDelta(content_delta="a"))))
    signed = observer.observe(run.item(PartDeltaEvent(index=0, delta=ThinkingPartDelta(signature_delta="sig"))))
    end = observer.observe(run.item(PartEndEvent(index=0, part=ThinkingPart("a", signature="sig"))))
    assert types(first) == ["REASONING_MESSAGE_START", "REASONING_MESSAGE_CONTENT"]
    assert types(signed) == ["REASONING_ENCRYPTED_VALUE"]
    assert types(end) == ["REASONING_MESSAGE_END"]


def test_thinking_end_only_fills_in_what_was_missing(run: SourceRun, observer: HarnessAguiObserver) -> None:
    observer.observe(run.item(PartStartEvent(index=0, part=ThinkingPart(""))))
    end = observer.observe(run.item(PartEndEvent(index=0, part=ThinkingPart("all", signature="sig"))))
    assert types(end) == ["REASONING_MESSAGE_CONTENT", "REASONING_ENCRYPTED_VALUE", "REASONING_MESSAGE_END"]


def test_tool_call_parts_become_one_call_at_the_end(run: SourceRun, observer: HarnessAguiObserver) -> None:
    start = observer.observe(run.item(PartStartEvent(index=0, part=ToolCallPart("weather", None, tool_call_id="c1"))))
    delta = observer.observe(run.item(PartDeltaEvent(index=0, delta=ToolCallPartDelta(args_delta='{"city"'))))
    end = observer.observe(
        run.item(PartEndEvent(index=0, part=ToolCallPart("weather", {"z": 1, "city": "Paris"}, tool_call_id="c1")))
    )
    assert [event_as(CustomEvent, event).name for event in start + delta] == [
        "a13n.pydantic_ai.part_start",
        "a13n.pydantic_ai.part_delta",
    ]
    assert [event.model_dump(exclude={"timestamp"}) for event in end] == [
        ToolCallStartEvent(tool_call_id="c1", tool_call_name="weather").model_dump(),
        ToolCallArgsEvent(tool_call_id="c1", delta='{"city":"Paris","z":1}').model_dump(),
        ToolCallEndEvent(tool_call_id="c1").model_dump(),
    ]


def test_tool_call_args_text_and_none(run: SourceRun, observer: HarnessAguiObserver) -> None:
    text = observer.observe(run.item(PartEndEvent(index=0, part=ToolCallPart("a", '{"x": 1}', tool_call_id="c1"))))
    none = observer.observe(run.item(PartEndEvent(index=1, part=ToolCallPart("b", None, tool_call_id="c2"))))
    assert event_as(ToolCallArgsEvent, text[1]).delta == '{"x": 1}'
    assert types(none) == ["TOOL_CALL_START", "TOOL_CALL_END"]


def test_tool_call_opened_by_a_delta(run: SourceRun, observer: HarnessAguiObserver) -> None:
    observer.observe(run.item(PartDeltaEvent(index=0, delta=ToolCallPartDelta(tool_name_delta="wea"))))
    observer.observe(run.item(PartDeltaEvent(index=0, delta=ToolCallPartDelta(tool_name_delta="ther"))))
    end = observer.observe(run.item(PartEndEvent(index=0, part=ToolCallPart("", None, tool_call_id=""))))
    assert (
        end[0].model_dump(exclude={"timestamp"})
        == ToolCallStartEvent(tool_call_id="run-1:request-0:part-0:tool", tool_call_name="weather").model_dump()
    )


def test_the_opening_tool_call_id_wins_at_the_end(run: SourceRun, observer: HarnessAguiObserver) -> None:
    observer.observe(run.item(PartStartEvent(index=0, part=ToolCallPart("a", None, tool_call_id="c1"))))
    end = observer.observe(run.item(PartEndEvent(index=0, part=ToolCallPart("a", None, tool_call_id="other"))))
    calls = [event for event in end if isinstance(event, ToolCallStartEvent | ToolCallArgsEvent | ToolCallEndEvent)]
    assert calls == list(end) and {event.tool_call_id for event in calls} == {"c1"}


def test_successful_tool_result(run: SourceRun, observer: HarnessAguiObserver) -> None:
    (event,) = observer.observe(run.item(FunctionToolResultEvent(ToolReturnPart("weather", {"t": 20}, "c1"))))
    assert (
        event.model_dump(exclude={"timestamp"})
        == ToolCallResultEvent(message_id="c1:result", tool_call_id="c1", content='{"t":20}', role="tool").model_dump()
    )


def test_tool_result_with_media_is_a_list_of_parts(run: SourceRun, observer: HarnessAguiObserver) -> None:
    part = ToolReturnPart("snap", ["a picture", BinaryContent(b"png!", media_type="image/png")], "c1")
    (event,) = observer.observe(run.item(FunctionToolResultEvent(part)))
    assert isinstance(event, ToolCallResultEvent)
    assert isinstance(event.content, list)
    assert event.content[0] == AguiTextPart(text="a picture")
    assert isinstance(event.content[1], ImagePart) and event.content[1].source.value == "cG5nIQ=="


@pytest.mark.parametrize("outcome", ["failed", "denied", "interrupted", "retried"])
def test_unsuccessful_tool_result_answers_the_call_and_a_custom_says_the_outcome(
    run: SourceRun, observer: HarnessAguiObserver, outcome: Any
) -> None:
    part = ToolReturnPart("weather", "boom", "c1", outcome=outcome)
    result, event = observer.observe(run.item(FunctionToolResultEvent(part, content="extra user content")))
    # An AG-UI client closes the call only on a TOOL_CALL_RESULT; a denied call must not stay open there.
    assert (
        result.model_dump(exclude={"timestamp"})
        == ToolCallResultEvent(message_id="c1:result", tool_call_id="c1", content="boom", role="tool").model_dump()
    )
    assert isinstance(event, CustomEvent) and event.name == "a13n.pydantic_ai.function_tool_result"
    assert event.value["event"]["part"]["outcome"] == outcome
    assert event.value["event"]["part"]["content"] == "boom"
    assert event.value["event"]["content"] is None


def test_completed_terminal_closes_open_text_first(run: SourceRun, observer: HarnessAguiObserver) -> None:
    observer.observe(run.item(PartStartEvent(index=0, part=TextPart("partial"))))
    observer.observe(run.item(PartStartEvent(index=1, part=ToolCallPart("a", None, tool_call_id="c1"))))
    terminal = run.completed({"answer": 42})
    events = observer.observe(terminal)
    assert types(events) == ["TEXT_MESSAGE_END", "RUN_FINISHED"]
    finished = events[1]
    assert isinstance(finished, RunFinishedEvent)
    assert finished.result == {"answer": 42}
    assert finished.outcome is not None and finished.outcome.type == "success"
    assert finished.usage is None
    assert finished.raw_event == {
        "thread_id": "thread_1",
        "run_id": "run-1",
        "sequence": terminal.sequence,
        "occurred_at": terminal.occurred_at.isoformat(),
        "status": "completed",
    }
    assert_agui_stream(observer.snapshot(), complete=True)


def test_completed_with_output_that_has_no_json(run: SourceRun, observer: HarnessAguiObserver) -> None:
    (event,) = observer.observe(run.completed(object()))
    assert isinstance(event, RunFinishedEvent)
    assert event.result is None and "result" not in json.loads(event.model_dump_json(by_alias=True))
    assert event.raw_event is not None and event.raw_event["result_omitted"] is True


def test_suspended_terminal_lists_interrupts_approvals_first(run: SourceRun, observer: HarnessAguiObserver) -> None:
    external = ToolCallPart("lookup", '{"q": "x"}', tool_call_id="call-ext")
    approval = ToolCallPart("rm", {"path": "/x"}, tool_call_id="call-rm")
    (event,) = observer.observe(
        run.suspended(approvals=[approval], calls=[external], metadata={"call-rm": {"risk": "high"}})
    )
    assert isinstance(event, RunFinishedEvent) and event.outcome is not None
    assert event.outcome.type == "interrupt"
    interrupts = [interrupt.model_dump(exclude_none=True) for interrupt in event.outcome.interrupts]
    assert interrupts == [
        {
            "id": "call-rm",
            "tool_call_id": "call-rm",
            "reason": "approval",
            "metadata": {"tool_name": "rm", "args": {"path": "/x"}, "tool_metadata": {"risk": "high"}},
        },
        {
            "id": "call-ext",
            "tool_call_id": "call-ext",
            "reason": "external",
            "metadata": {"tool_name": "lookup", "args": {"q": "x"}, "tool_metadata": None},
        },
    ]


def test_failed_and_cancelled_terminals(run: SourceRun) -> None:
    failed = HarnessAguiObserver()
    failed.observe(run.started())
    (error,) = failed.observe(run.failed("tool_crashed", "A tool crashed."))
    assert isinstance(error, RunErrorEvent)
    assert (error.code, error.message) == ("tool_crashed", "A tool crashed.")
    assert error.raw_event is not None and error.raw_event["failure"]["code"] == "tool_crashed"

    other = SourceRun(run_id="run-2")
    cancelled = HarnessAguiObserver()
    cancelled.observe(other.started())
    (finished,) = cancelled.observe(other.cancelled())
    assert isinstance(finished, RunFinishedEvent) and finished.outcome is not None
    assert finished.outcome.type == "cancelled"


def test_usage_only_when_counted(run: SourceRun, observer: HarnessAguiObserver) -> None:
    (event,) = observer.observe(run.completed("ok", input_tokens=10, output_tokens=5, requests=1))
    assert isinstance(event, RunFinishedEvent)
    assert event.usage == [TokenUsage(input_tokens=10, output_tokens=5, total_tokens=15)]

    other = HarnessAguiObserver()
    other.observe(SourceRun(run_id="run-2").started())
    (cached,) = other.observe(
        SourceRun(run_id="run-2").completed("ok", cache_read_tokens=7, cache_write_tokens=2, reasoning_tokens=3)
    )
    assert isinstance(cached, RunFinishedEvent)
    assert cached.usage == [
        TokenUsage(
            input_tokens=0,
            output_tokens=0,
            total_tokens=0,
            reasoning_tokens=3,
            cached_input_tokens=7,
            cache_write_input_tokens=2,
        )
    ]


def test_extension_events_are_customs(run: SourceRun, observer: HarnessAguiObserver) -> None:
    payload = {"type": "tool_extra", "name": "filesystem.changed"}
    tool_item = run.item(HarnessExtensionEvent(kind="tool", payload=payload))
    (tool,) = observer.observe(tool_item)
    (other,) = observer.observe(run.item(HarnessExtensionEvent(kind="diagnostic", payload={"type": "note"})))
    assert isinstance(tool, CustomEvent) and tool.name == "a13n.harness.tool.filesystem.changed"
    assert isinstance(other, CustomEvent) and other.name == "a13n.harness.diagnostic"
    assert tool.value == {
        "thread_id": "thread_1",
        "run_id": "run-1",
        "sequence": tool_item.sequence,
        "occurred_at": tool_item.occurred_at.isoformat(),
        "event": {
            "schema_version": "1",
            "kind": "tool",
            "payload": {"type": "tool_extra", "name": "filesystem.changed"},
        },
    }


@pytest.mark.parametrize(("source", "role"), [("user", "user"), ("steering", "user"), ("context", "system")])
def test_input_events_are_customs_named_by_their_source(
    run: SourceRun, observer: HarnessAguiObserver, source: InputSource, role: str
) -> None:
    """T102."""
    item = run.item(InputTextEvent(input_id="input-0", source=source, content="look up REC-7"))
    (event,) = observer.observe(item)
    assert isinstance(event, CustomEvent) and event.name == f"a13n.input.{source}"
    assert event.value["event"] == {
        "input_id": "input-0",
        "source": source,
        "content": "look up REC-7",
        "message_id": f"run-1:input:{item.sequence}",
        "role": role,
    }
    assert (event.name in AUTHORED_INPUT_EVENT_NAMES) == (role == "user")


def test_native_events_without_a_standard_form(run: SourceRun, observer: HarnessAguiObserver) -> None:
    (final,) = observer.observe(run.item(FinalResultEvent(tool_name=None, tool_call_id=None)))
    (enqueued,) = observer.observe(run.item(EnqueuedMessagesEvent(enqueue_id="q1", messages=())))
    results = DeferredToolResults(calls={"c1": "x"}, approvals={"c2": True})
    (deferred,) = observer.observe(run.item(DeferredToolResultsEvent(results=results)))
    assert isinstance(final, CustomEvent) and final.name == "a13n.pydantic_ai.final_result"
    assert isinstance(enqueued, CustomEvent)
    assert enqueued.value["event"] == {"event_kind": "enqueued_messages", "enqueue_id": "q1"}
    assert isinstance(deferred, CustomEvent)
    assert deferred.value["event"] == {
        "event_kind": "deferred_tool_results",
        "call_ids": ["c1"],
        "approval_ids": ["c2"],
    }


@pytest.mark.parametrize(
    "bad",
    [
        PartDeltaEvent(index=1, delta=ThinkingPartDelta(content_delta="x")),
        PartEndEvent(index=1, part=TextPart("t", id="msg_other")),
        PartEndEvent(index=1, part=ToolCallPart("a", None, tool_call_id="c9")),
    ],
    ids=["kind-change-delta", "id-change-end", "kind-change-end"],
)
def test_text_part_kind_or_identity_change(run: SourceRun, observer: HarnessAguiObserver, bad: Any) -> None:
    observer.observe(run.item(PartStartEvent(index=1, part=TextPart("t", id="msg_1"))))
    before = observer.snapshot()
    with pytest.raises(AguiObservationError):
        observer.observe(run.item(bad))
    assert observer.snapshot() == before and observer.event_count == len(before)
    # The cursor survived untouched: the proper end still closes the message.
    assert types(observer.observe(run.item(PartEndEvent(index=1, part=TextPart("t", id="msg_1"))))) == [
        "TEXT_MESSAGE_END"
    ]


def test_generated_text_id_then_provider_id_conflicts(run: SourceRun, observer: HarnessAguiObserver) -> None:
    observer.observe(run.item(PartStartEvent(index=0, part=TextPart("t"))))
    with pytest.raises(AguiObservationError):
        observer.observe(run.item(PartEndEvent(index=0, part=TextPart("t", id="msg_1"))))


def test_tool_delta_with_another_call_id(run: SourceRun, observer: HarnessAguiObserver) -> None:
    observer.observe(run.item(PartStartEvent(index=0, part=ToolCallPart("a", None, tool_call_id="c1"))))
    count = observer.event_count
    with pytest.raises(AguiObservationError):
        observer.observe(run.item(PartDeltaEvent(index=0, delta=ToolCallPartDelta(tool_call_id="c2"))))
    assert observer.event_count == count


def test_large_custom_events_are_fragmented(run: SourceRun, observer: HarnessAguiObserver) -> None:
    big = run.item(HarnessExtensionEvent(kind="diagnostic", payload={"blob": "x" * 55_000 + "é" * 1000}))
    frames = observer.observe(big)
    assert len(frames) > 1
    assert all(isinstance(frame, CustomEvent) and frame.name == FRAGMENT_EVENT_NAME for frame in frames)
    assert {event_as(CustomEvent, frame).value["id"] for frame in frames} == {f"thread_1:run-1:{big.sequence}:0"}
    assembler = CustomEventAssembler()
    assembled = [event for frame in frames if (event := assembler.feed(frame)) is not None]
    (whole,) = assembled
    assert isinstance(whole, CustomEvent) and whole.name == "a13n.harness.diagnostic"
    assert whole.value["event"]["payload"] == {"blob": "x" * 55_000 + "é" * 1000}

    small = observer.observe(run.item(HarnessExtensionEvent(kind="diagnostic", payload={"blob": "x" * 1000})))
    assert len(small) == 1 and event_as(CustomEvent, small[0]).name == "a13n.harness.diagnostic"


@pytest.mark.parametrize(
    "value",
    [
        {"id": "f", "index": 2, "count": 2, "data": "x"},
        {"id": "f", "index": 0, "count": 3, "data": "x"},
        {"id": "f", "index": "0", "count": 2, "data": "x"},
        {"id": "f", "count": 2, "data": "x"},
        "not a fragment",
    ],
)
def test_a_malformed_fragment_is_rejected_and_changes_nothing(value: object) -> None:
    def frame(value: object) -> CustomEvent:
        return CustomEvent(name=FRAGMENT_EVENT_NAME, value=value)

    assembler = CustomEventAssembler()
    assert assembler.feed(frame({"id": "f", "index": 0, "count": 2, "data": '{"type":"CUSTOM",'})) is None
    with pytest.raises(ValueError, match="fragment"):
        assembler.feed(frame(value))
    whole = assembler.feed(frame({"id": "f", "index": 1, "count": 2, "data": '"name":"n","value":1}'}))
    assert isinstance(whole, CustomEvent) and (whole.name, whole.value) == ("n", 1)


def test_other_run_or_thread_is_rejected(run: SourceRun, observer: HarnessAguiObserver) -> None:
    before = observer.snapshot()
    with pytest.raises(AguiObservationError, match="run correlation"):
        observer.observe(SourceRun(run_id="run-2").item(FinalResultEvent(tool_name=None, tool_call_id=None)))
    with pytest.raises(AguiObservationError, match="thread correlation"):
        observer.observe(SourceRun(thread_id="thread_2").item(FinalResultEvent(tool_name=None, tool_call_id=None)))
    assert observer.snapshot() == before
    assert (observer.thread_id, observer.run_id) == ("thread_1", "run-1")


def test_snapshot_copies_are_detached(run: SourceRun, observer: HarnessAguiObserver) -> None:
    (returned,) = observer.observe(run.completed({"k": [1]}))
    assert isinstance(returned, RunFinishedEvent) and returned.result is not None
    returned.result["k"].append(2)
    snapshot = observer.snapshot()
    assert snapshot[-1].raw_event is not None
    snapshot[-1].raw_event["status"] = "changed"
    (terminal,) = observer.snapshot()[-1:]
    assert isinstance(terminal, RunFinishedEvent) and terminal.result == {"k": [1]}
    assert terminal.raw_event is not None and terminal.raw_event["status"] == "completed"


def test_snapshot_window(run: SourceRun, observer: HarnessAguiObserver) -> None:
    observer.observe(run.item(PartEndEvent(index=0, part=TextPart("x"))))
    assert types(observer.snapshot(start=1, stop=3)) == ["TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT"]
    assert observer.snapshot(start=4) == ()
    with pytest.raises(ValueError):
        observer.snapshot(start=2, stop=1)
    with pytest.raises(ValueError):
        observer.snapshot(stop=observer.event_count + 1)
    with pytest.raises(ValueError):
        observer.snapshot(start=-1)


def test_output_is_a_valid_agui_stream(run: SourceRun, observer: HarnessAguiObserver) -> None:
    for event in [
        PartStartEvent(index=0, part=ThinkingPart("a")),
        PartEndEvent(index=0, part=ThinkingPart("a")),
        PartStartEvent(index=1, part=TextPart("b")),
        PartEndEvent(index=1, part=TextPart("b")),
        PartStartEvent(index=2, part=ToolCallPart("t", None, tool_call_id="c1")),
        PartEndEvent(index=2, part=ToolCallPart("t", {"a": 1}, tool_call_id="c1")),
        FunctionToolResultEvent(ToolReturnPart("t", "ok", "c1")),
    ]:
        observer.observe(run.item(event))
    observer.observe(run.completed())
    snapshot = observer.snapshot()
    assert_agui_stream(snapshot, complete=True)
    assert snapshot[-1].type == EventType.RUN_FINISHED


@dataclass(kw_only=True)
class StepDone(CapabilityEvent, namespace="demo"):
    step: int = 0


@dataclass(kw_only=True)
class Progress(NativeCustomEvent):
    percent: int = 0


def test_capability_and_native_custom_events(run: SourceRun, observer: HarnessAguiObserver) -> None:
    (capability,) = observer.observe(run.item(StepDone(step=2)))
    (progress,) = observer.observe(run.item(Progress(name="progress", percent=40)))
    assert isinstance(capability, CustomEvent) and capability.name == "demo.step_done"
    assert capability.value["event"]["step"] == 2
    assert isinstance(progress, CustomEvent) and progress.name == "a13n.pydantic_ai.custom"
    assert progress.value["event"] == {
        "name": "progress",
        "tool_call_id": None,
        "tool_name": None,
        "event_kind": "custom",
        "percent": 40,
    }
