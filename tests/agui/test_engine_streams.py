"""Real harness engine streams (the offline demo agent) through the observers."""

from __future__ import annotations

from typing import Any

import pytest
from ag_ui.core import (
    BaseEvent,
    EventType,
    RunErrorEvent,
    RunFinishedEvent,
    SubagentErrorEvent,
    SubagentFinishedEvent,
    SubagentStartedEvent,
    ToolCallResultEvent,
)

from observers.agui import HarnessAguiObserver, HarnessAguiStreamObserver
from runs.harness import DeferredToolResume, HarnessRunResultEvent, HarnessStreamEvent
from runs.harness.demo import build_demo_agent
from tests.support.agui_rules import assert_agui_stream, events_of, interrupts_of
from tests.support.factories import history


async def stream_items(prompt: str | None, **options: Any) -> list[HarnessStreamEvent[Any]]:
    async with build_demo_agent().stream(prompt, **options) as stream:
        return [item async for item in stream]


def project(observer: HarnessAguiObserver, items: list[HarnessStreamEvent[Any]]) -> list[tuple[BaseEvent, ...]]:
    return [observer.observe(item) for item in items]


@pytest.mark.parametrize(
    ("prompt", "status"),
    [
        ("hello there", "completed"),
        ("please look up the record", "completed"),
        ("fail please", "failed"),
        ("ask the operator", "suspended"),
        ("deploy it", "suspended"),
        ("delegate some research", "completed"),
        ("tour", "suspended"),
    ],
)
async def test_demo_runs_project_to_well_formed_agui(prompt: str, status: str) -> None:
    items = await stream_items(prompt)
    terminal = items[-1]
    assert isinstance(terminal, HarnessRunResultEvent) and terminal.result.status == status
    observer = HarnessAguiStreamObserver()
    events = [event for output in project(observer, items) for event in output]
    assert_agui_stream(events, complete=True)
    assert events[0].type == EventType.RUN_STARTED
    last = events[-1]
    if status == "failed":
        failure = terminal.result.failure
        assert failure is not None
        assert isinstance(last, RunErrorEvent) and last.code == failure.code
    else:
        assert isinstance(last, RunFinishedEvent) and last.outcome is not None
        assert last.outcome.type == {"completed": "success", "suspended": "interrupt"}[status]
    if status == "suspended":
        deferred = terminal.result.deferred
        assert deferred is not None
        expected = [entry.target_call.tool_call_id for entry in [*deferred.approvals, *deferred.calls]]
        assert [interrupt.id for interrupt in interrupts_of(last)] == expected


async def test_inline_delegation_is_attributed_to_the_child() -> None:
    items = await stream_items("delegate some research")
    child_runs = {item.run_id for item in items} - {items[0].run_id}
    assert len(child_runs) == 1
    (child,) = child_runs
    observer = HarnessAguiStreamObserver()
    events = [event for output in project(observer, items) for event in output]
    started = [event for event in events if isinstance(event, SubagentStartedEvent)]
    finished = [event for event in events if isinstance(event, SubagentFinishedEvent)]
    assert [event.subagent_run_id for event in started + finished] == [child, child]
    attributed = [event for event in events if getattr(event, "subagent_run_id", None) == child]
    assert {event.type for event in attributed} >= {EventType.TEXT_MESSAGE_CONTENT, EventType.TOOL_CALL_START}
    # Only the root's lifecycle reaches AG-UI as run events.
    assert [event.type for event in events].count(EventType.RUN_STARTED) == 1


async def test_a_single_run_observer_takes_runs_without_children() -> None:
    items = await stream_items("please look up the record")
    single = project(HarnessAguiObserver(), items)
    stream = project(HarnessAguiStreamObserver(), items)
    assert single == stream


@pytest.mark.parametrize("prompt", ["tour", "delegate some research"])
async def test_engine_stream_replays_identically_at_every_split(prompt: str) -> None:
    items = await stream_items(prompt)
    live = project(HarnessAguiStreamObserver(), items)
    for split in range(len(items) + 1):
        observer = HarnessAguiStreamObserver()
        await observer.resume(history(items[:split]))
        assert project(observer, items[split:]) == live[split:]


async def test_a_deferred_resume_is_a_new_run_with_its_own_observer() -> None:
    executable = build_demo_agent()
    async with executable.stream("deploy it") as first_stream:
        first = [item async for item in first_stream]
    terminal = first[-1]
    assert isinstance(terminal, HarnessRunResultEvent)
    suspended = terminal.result
    assert suspended.deferred is not None
    resume = DeferredToolResume(suspended.deferred, suspended.deferred.build_results(approve_all=True))
    async with executable.stream(previous_state=suspended.state, deferred_resume=resume) as second_stream:
        second = [item async for item in second_stream]

    first_observer, second_observer = HarnessAguiObserver(), HarnessAguiObserver()
    first_events = [event for output in project(first_observer, first) for event in output]
    second_events = [event for output in project(second_observer, second) for event in output]
    assert_agui_stream(first_events, complete=True)
    assert_agui_stream(second_events, complete=True)
    assert first_observer.run_id != second_observer.run_id
    assert first_observer.thread_id == second_observer.thread_id
    # The approved call's result arrives in the second run, under the id the first run's interrupt named.
    (interrupt,) = interrupts_of(first_events[-1])
    results = events_of(ToolCallResultEvent, second_events)
    assert interrupt.tool_call_id in {event.tool_call_id for event in results}


async def test_a_root_cancelled_inside_its_child_projects_a_closed_child() -> None:
    """The cancelled child's delegation fact closes its open text and its lane before the root's terminal."""
    stream = build_demo_agent().stream("delegate some research")
    items: list[HarnessStreamEvent[Any]] = []
    async with stream:
        async for item in stream:
            items.append(item)
            if item.run_id != stream.run_id and type(getattr(item, "event", None)).__name__ == "PartDeltaEvent":
                stream.cancel()
    assert isinstance(items[-1], HarnessRunResultEvent) and items[-1].result.status == "cancelled"

    events = [event for output in project(HarnessAguiStreamObserver(), items) for event in output]

    assert_agui_stream(events, complete=True)
    (error,) = events_of(SubagentErrorEvent, events)
    assert error.code == "cancelled"
