"""Host runs executed in this process: start one, kill its worker at a checkpoint as kill -9 would, expire its
lease, and check that its journal and timeline have no gaps."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from runs.harness import HarnessState
from runs.harness.demo import demo_tools
from runs.models import Checkpoint, Execution, Run, Thread, TimelineEvent
from runs.services.lifecycle import executions
from runs.services.store import checkpoints
from runs.services.worker import runner
from tests.support import factories

DEMO_TOOLS = sorted(demo_tools())


class Crash(BaseException):
    """Stands in for kill -9: nothing below the worker's loop handles it."""


def start(thread: Thread, text: str) -> Run:
    return executions.start_execution(thread, text).runs.get()


def assert_contiguous(execution: Execution) -> None:
    positions = list(TimelineEvent.objects.filter(execution=execution).values_list("position", flat=True))
    assert positions == list(range(1, len(positions) + 1))
    for run in execution.runs.all():
        indexes = list(run.journal.values_list("index", flat=True))
        assert indexes == list(range(len(indexes)))
        for source in set(run.journal.values_list("source_run_id", flat=True)):
            sequences = list(run.journal.filter(source_run_id=source).values_list("source_sequence", flat=True))
            assert sequences == list(range(len(sequences)))


def crash_at_model_request(monkeypatch: pytest.MonkeyPatch, number: int, boundary: str = "model_request") -> None:
    """Kill the worker when it is about to store its `number`-th checkpoint at `boundary`."""
    real = checkpoints.record
    seen = {"count": 0}

    def record(run: Run, state: HarnessState, **kwargs: Any) -> Checkpoint:
        if kwargs.get("metadata", {}).get("boundary") == boundary:
            seen["count"] += 1
            if seen["count"] == number:
                raise Crash
        return real(run, state, **kwargs)

    monkeypatch.setattr(checkpoints, "record", record)


def expire_leases() -> None:
    Run.objects.exclude(lease_token=None).update(lease_expires_at=timezone.now() - timedelta(seconds=1))


def dead_after_the_slow_step(thread: Thread, monkeypatch: pytest.MonkeyPatch) -> Run:
    """A run whose worker died after the slow step returned, its lease already expired."""
    dead = start(thread, "look up the record, then a slow 0.1 step")
    crash_at_model_request(monkeypatch, 3)
    with pytest.raises(Crash):
        runner.execute_run(dead.pk)
    monkeypatch.undo()
    expire_leases()
    dead.refresh_from_db()
    return dead


def crashed_run(monkeypatch: pytest.MonkeyPatch) -> Run:
    """A run whose worker died after its first model request, with an open lane and an expired lease."""
    run = factories.queued_run("look up REC-42", on=factories.thread(model="demo", tools=DEMO_TOOLS))
    crash_at_model_request(monkeypatch, 2)
    with pytest.raises(Crash):
        runner.execute_run(run.pk)
    monkeypatch.undo()
    expire_leases()
    return run
