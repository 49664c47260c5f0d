"""The duration model (runs.services.reports.durations): active spans, waits between runs and their causes, a
dead run's span ending at its last sign of life, a wait cancelled drawn to the cancel, and wall = active + waits."""

from __future__ import annotations

from datetime import timedelta

import pytest
from ag_ui.core import CustomEvent, RunErrorEvent, RunStartedEvent, ToolCallStartEvent

from runs.models import Checkpoint, DeferredRequest
from runs.services.reports import durations
from tests.support import factories

pytestmark = pytest.mark.django_db
START = factories.START
T0 = int(START.timestamp() * 1000)


def at(seconds: float):
    return START + timedelta(seconds=seconds)


def causes(times) -> list[tuple[str, float]]:
    return [(wait.cause, (wait.end - wait.start).total_seconds()) for wait, _, _ in times.waits]


def test_a_dead_run_works_until_its_last_event_and_then_waits_for_its_lease_and_recovery():
    execution = factories.make_execution(status="completed")
    dead = factories.make_run(execution, status="abandoned", started_at=at(0), finished_at=at(32))
    tid = execution.thread.thread_id
    factories.append_events(
        dead,
        [
            RunStartedEvent(thread_id=tid, run_id=dead.run_id, timestamp=T0),
            ToolCallStartEvent(tool_call_id="c1", tool_call_name="lookup", timestamp=T0 + 600),
            RunErrorEvent(message="The worker stopped.", code="worker_lost", timestamp=T0 + 32_500),
        ],
    )
    factories.make_run(execution, reason="recovery", status="completed", started_at=at(34), finished_at=at(36))
    times = durations.execution_times(execution)
    now = at(100)
    assert [span.active(now).total_seconds() for span in times.spans] == [0.6, 2.0]
    assert causes(times) == [("lease expired", 31.4), ("recovery", 2.0)]
    assert times.active(now) == timedelta(seconds=2.6)
    assert times.wall(now) == timedelta(seconds=36) == times.active(now) + times.waited(now)


def test_a_wait_for_approval_is_split_at_the_decision_and_the_resume():
    execution = factories.make_execution(status="completed")
    first = factories.make_run(execution, status="suspended", started_at=at(0), finished_at=at(3))
    factories.append_events(
        first,
        [CustomEvent(name="a13n.host.decision", value={"decided_by": "op", "calls": []}, timestamp=T0 + 153_000)],
    )
    factories.make_run(execution, reason="resume", status="completed", started_at=at(155), finished_at=at(160))
    times = durations.execution_times(execution)
    assert causes(times) == [("waiting for approval", 150.0), ("from the answer to the resuming run", 2.0)]
    assert times.wall(at(999)) == timedelta(seconds=160)
    texts = durations.totals(times, list(execution.runs.all()), at(999))
    assert (texts.active, texts.wall, texts.waited) == ("8.0 s", "2 min 40 s", "2 min 32 s")


def test_an_execution_cancelled_while_waiting_ends_with_that_wait():
    execution = factories.make_execution(status="cancelled")
    run = factories.make_run(execution, status="suspended", started_at=at(0), finished_at=at(1))
    checkpoint = Checkpoint.objects.create(thread=execution.thread, run=run, kind="terminal", state_json="{}")
    DeferredRequest.objects.create(
        execution=execution, run=run, checkpoint=checkpoint, tool_call_id="q", kind="question"
    )
    execution.finished_at = at(181)
    execution.save()
    times = durations.execution_times(execution)
    assert causes(times) == [("waiting for an answer, then cancelled", 180.0)]
    assert times.wall(at(999)) == timedelta(seconds=181)


def test_open_spans_and_waits_end_now():
    execution = factories.make_execution(status="waiting")
    factories.make_run(execution, status="suspended", started_at=at(0), finished_at=at(2))
    times = durations.execution_times(execution)
    assert causes_open(times) == [("waiting for approval", None)]
    assert times.wall(at(10)) == timedelta(seconds=10)
    assert times.as_json(at(10))["waits"][0]["end"] is None

    running = factories.make_execution(status="running")
    factories.make_run(running, status="running", started_at=at(0))
    assert durations.execution_times(running).active(at(7)) == timedelta(seconds=7)


def causes_open(times) -> list[tuple[str, object]]:
    return [(wait.cause, wait.end) for wait, _, _ in times.waits]
