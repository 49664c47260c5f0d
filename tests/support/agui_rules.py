"""Checks that an observer's output is a well-formed AG-UI 1.0 stream, and picks its events by class."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

from ag_ui.core import (
    BaseEvent,
    Event,
    EventType,
    Interrupt,
    ReasoningEncryptedValueEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    SubagentErrorEvent,
    SubagentFinishedEvent,
    SubagentStartedEvent,
    ToolCallResultEvent,
)
from ag_ui.encoder import EventEncoder
from pydantic import TypeAdapter

_EVENT: TypeAdapter[Any] = TypeAdapter(Event)
_ENCODER = EventEncoder()

_MESSAGE_KINDS = {
    EventType.TEXT_MESSAGE_START: ("text", "start"),
    EventType.TEXT_MESSAGE_CONTENT: ("text", "content"),
    EventType.TEXT_MESSAGE_END: ("text", "end"),
    EventType.REASONING_MESSAGE_START: ("reasoning", "start"),
    EventType.REASONING_MESSAGE_CONTENT: ("reasoning", "content"),
    EventType.REASONING_MESSAGE_END: ("reasoning", "end"),
    EventType.TOOL_CALL_START: ("tool", "start"),
    EventType.TOOL_CALL_ARGS: ("tool", "content"),
    EventType.TOOL_CALL_END: ("tool", "end"),
}
_RUN_TERMINALS = (EventType.RUN_FINISHED, EventType.RUN_ERROR)

EventT = TypeVar("EventT", bound=BaseEvent)


def event_as(kind: type[EventT], event: BaseEvent) -> EventT:
    """`event`, which must be a `kind`: its fields, typed, for the assertions that follow."""
    assert isinstance(event, kind), f"{event.type.value} is no {kind.__name__}"
    return event


def events_of(kind: type[EventT], events: Iterable[BaseEvent]) -> list[EventT]:
    """The events of one class, in their order (each AG-UI event type has its own class)."""
    return [event for event in events if isinstance(event, kind)]


def interrupts_of(event: BaseEvent) -> list[Interrupt]:
    """What a run that stopped for answers asks: `event` must be its RUN_FINISHED, with an interrupt outcome."""
    outcome = event_as(RunFinishedEvent, event).outcome
    assert isinstance(outcome, RunFinishedInterruptOutcome), f"the run finished with {outcome!r}"
    return outcome.interrupts


def assert_wire_valid(event: BaseEvent) -> None:
    """The SSE frame the ag-ui encoder makes of `event` parses back, strictly, to an equal event."""
    frame = _ENCODER.encode(event)
    assert frame.startswith("data: ") and frame.endswith("\n\n")
    parsed = _EVENT.validate_json(frame[len("data: ") : -2], strict=True)
    assert parsed == event


def assert_agui_stream(events: Sequence[BaseEvent], *, complete: bool, calls_seen: bool = False) -> None:
    """AG-UI ordering rules over the output of one observer.

    Per scope (the root run, or one subagent run): messages and tool calls start before their content and end
    exactly once; reasoning encrypted values belong to an open reasoning message; tool results follow the end
    of their call when the call was seen; subagent events sit between SUBAGENT_STARTED and the subagent's
    finish; nothing follows the root's RUN_FINISHED / RUN_ERROR. With `complete`, everything was closed.
    Every toolCallId and every messageId is opened once in the whole run, subagents included, and an interrupt
    names a tool call the run started. With `calls_seen` (every call is in this stream), each tool result names
    a call of its own scope that already ended and had no result yet.
    """
    open_entities: dict[tuple[str | None, str, str], int] = {}
    opened_ids: set[tuple[str, str]] = set()
    answered: set[tuple[str | None, str, str]] = set()
    ended: set[tuple[str | None, str, str]] = set()
    subagents_open: set[str] = set()
    subagents_done: set[str] = set()
    run_started = run_over = False
    for position, event in enumerate(events):
        assert_wire_valid(event)
        where = f"event {position} ({event.type.value})"
        assert not run_over, f"{where} after the run finished"
        scope = getattr(event, "subagent_run_id", None)
        if event.type == EventType.RUN_STARTED:
            assert not run_started and position == 0, f"{where}: RUN_STARTED must come first, once"
            run_started = True
            continue
        if event.type in _RUN_TERMINALS:
            run_over = True
            outcome = getattr(event, "outcome", None)
            for interrupt in getattr(outcome, "interrupts", None) or ():
                call = ("tool", interrupt.tool_call_id)
                assert call in opened_ids, f"{where}: interrupt {interrupt.id} names {call}, which never started"
            if complete:
                leftovers = [key for key in open_entities if key[0] is None]
                assert not leftovers, f"{where}: still open at the end of the run: {leftovers}"
            continue
        if isinstance(event, SubagentStartedEvent):
            child = event.subagent_run_id
            assert child not in subagents_open and child not in subagents_done, f"{where}: {child} started twice"
            subagents_open.add(child)
            continue
        if isinstance(event, SubagentFinishedEvent | SubagentErrorEvent):
            child = event.subagent_run_id
            assert child in subagents_open, f"{where}: {child} finished without being started (or twice)"
            leftovers = [key for key in open_entities if key[0] == child]
            assert not leftovers, f"{where}: {child} finished with open entities {leftovers}"
            subagents_open.discard(child)
            subagents_done.add(child)
            continue
        if scope is not None:
            assert scope in subagents_open, f"{where}: attributed to {scope}, which is not running"
        if event.type in _MESSAGE_KINDS:
            kind, step = _MESSAGE_KINDS[event.type]
            entity = getattr(event, "tool_call_id", None) or getattr(event, "message_id", None)
            assert isinstance(entity, str), f"{where}: names no tool call or message"
            key = (scope, kind, entity)
            if step == "start":
                assert key not in open_entities and key not in ended, f"{where}: {key} started twice"
                unique = ("tool" if kind == "tool" else "message", entity)
                assert unique not in opened_ids, f"{where}: id {entity!r} was already used in this run"
                opened_ids.add(unique)
                open_entities[key] = position
            elif step == "content":
                assert key in open_entities, f"{where}: content for {key}, which is not open"
            else:
                assert key in open_entities, f"{where}: end for {key}, which is not open"
                del open_entities[key]
                ended.add(key)
        elif isinstance(event, ReasoningEncryptedValueEvent):
            key = (scope, "reasoning", event.entity_id)
            assert key in open_entities, f"{where}: encrypted value for {key}, which is not open"
        elif isinstance(event, ToolCallResultEvent):
            key = (scope, "tool", event.tool_call_id)
            assert key not in open_entities, f"{where}: result for {key} before its call ended"
            if calls_seen:
                assert key in ended, f"{where}: result for {key}, which is not a call of its scope"
                assert key not in answered, f"{where}: a second result for {key}"
                answered.add(key)
            unique = ("message", event.message_id)
            assert unique not in opened_ids, f"{where}: id {event.message_id!r} was already used in this run"
            opened_ids.add(unique)
    if complete:
        assert run_started, "the run never started"
        assert not subagents_open, f"subagents never finished: {subagents_open}"
