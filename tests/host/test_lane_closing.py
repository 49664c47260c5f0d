"""Ending a lane whose stream broke off: the worker's own observer ends it as one rebuilt from the journal would."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync
from pydantic_ai import PartStartEvent, TextPart

from runs.harness import HarnessState, SafeFailure
from runs.models import TimelineEvent
from runs.services.store import journal
from runs.services.timeline import OpenLane, RunProjection, aclose_projection, dump_event
from tests.support import factories

pytestmark = pytest.mark.django_db

FAILURE = SafeFailure(code="host_error", message="The run stopped on an internal error (RuntimeError).")


def _without_times(value: Any) -> Any:
    # The closing items are stamped when they are made.
    if isinstance(value, dict):
        return {key: _without_times(item) for key, item in value.items() if key not in ("timestamp", "occurred_at")}
    if isinstance(value, list):
        return [_without_times(item) for item in value]
    return value


def test_the_workers_lane_inside_a_delegation_ends_as_one_rebuilt_from_the_journal(monkeypatch):
    run, lease = factories.leased_run()
    root = factories.SourceRun(run.run_id, run.execution.thread.thread_id)
    child = factories.SourceRun("run-" + "c" * 32, HarnessState.new().thread_id)
    items = [
        root.started(),
        root.delegation("started", child, status="running", parent_run_id=root.run_id),
        child.started(),
        child.item(PartStartEvent(index=0, part=TextPart("half a sentence"))),
    ]
    projection = RunProjection(run)
    lane = OpenLane(run, projection.observer)
    projection.record(items, lease=lease)
    for item in items:
        lane.note(item)
    rebuilt = async_to_sync(OpenLane.replayed)(run)
    expected = [
        dump_event(event) for item in rebuilt.closing_items(FAILURE) for event in rebuilt.observer.observe(item)
    ]

    def no_replay(*args, **kwargs):
        raise AssertionError("the lane was rebuilt from the journal")

    monkeypatch.setattr(journal, "read_prefix", no_replay)
    assert async_to_sync(aclose_projection)(run, FAILURE, lane)

    closing = [row.event for row in TimelineEvent.objects.filter(run=run, journal_entry=None).order_by("position")]
    assert _without_times(closing) == _without_times(expected)
    types = [event["type"] for event in closing]
    assert "TEXT_MESSAGE_END" in types and "SUBAGENT_ERROR" in types and types[-1] == "RUN_ERROR", types
    assert not async_to_sync(aclose_projection)(run, FAILURE, lane)
