"""Two sweepers at once: every dead run is abandoned, closed and recovered exactly once (also run on PostgreSQL)."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from runs.models import Run, TimelineEvent
from runs.services.recovery import recovery
from tests.support.host_runs import assert_contiguous, crashed_run

pytestmark = pytest.mark.django_db(transaction=True)

DEAD_RUNS = 6


def test_two_sweepers_at_once_recover_each_dead_run_exactly_once(monkeypatch, settings, redis_settings):
    settings.HARNESS_RECOVERY_BACKOFF_SECONDS = 0
    dead = [crashed_run(monkeypatch) for _ in range(DEAD_RUNS)]
    start = threading.Barrier(2)
    reports: list[recovery.SweepReport] = []
    errors: list[BaseException] = []

    def sweeper() -> None:
        try:
            start.wait()
            for _ in range(3):
                reports.append(recovery.sweep())
        except BaseException as error:
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=sweeper) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)

    assert errors == []
    totals = {name: sum(getattr(report, name) for report in reports) for name in ("abandoned", "closed", "recovered")}
    assert totals == {"abandoned": DEAD_RUNS, "closed": DEAD_RUNS, "recovered": DEAD_RUNS}
    for run in dead:
        assert Run.objects.filter(previous_run=run).count() == 1
        ends = TimelineEvent.objects.filter(run=run, subagent_run_id="", event_type="RUN_ERROR")
        assert ends.count() == 1
        assert_contiguous(run.execution)
