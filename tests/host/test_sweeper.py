"""The recovery sweeper keeps going: a bad row is failed with a clear code and skipped, an outage ends one pass."""

from __future__ import annotations

import io
from datetime import timedelta

import django_rq
import pytest
import redis
from django.core.management import CommandError, call_command
from django.utils import timezone

from runs.management.commands.harness_recover import sole_sweeper_on_sqlite
from runs.models import Execution, ExecutionStatus, HostPolicyVersion, Run, RunStatus, TimelineEvent
from runs.services.recovery import SWEEP_FAILED, recovery, sweeper_passes
from runs.services.store import queueing
from tests.support import factories
from tests.support.host_runs import crashed_run

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_backoff(settings):
    settings.HARNESS_RECOVERY_BACKOFF_SECONDS = 0


def old_queued_run_with_lease_seconds(seconds: int) -> Run:
    """A queued run whose job was lost long ago, frozen on a policy version with `lease_seconds`."""
    factories.configure_policy(max_attempts=3)
    run = factories.queued_run("hello")
    HostPolicyVersion.objects.filter(pk=run.policy_version_id).update(lease_seconds=seconds)
    Run.objects.filter(pk=run.pk).update(created_at=timezone.now() - timedelta(days=1))
    return Run.objects.get(pk=run.pk)


def test_a_row_that_overflows_fails_its_own_run_and_the_sweep_goes_on(monkeypatch):
    crashed = crashed_run(monkeypatch)
    bad = old_queued_run_with_lease_seconds(30)
    real_requeue = recovery.requeue_if_lost

    def requeue_if_lost(queue, run, *, now):
        if run.pk == bad.pk:
            # What a lease of 10**15 s did to the run's deadline before the policy's CHECK constraints
            # (test_policy_admin_checks) made such a row impossible: any row may still fail like this.
            raise OverflowError("date value out of range")
        return real_requeue(queue, run, now=now)

    monkeypatch.setattr(recovery, "requeue_if_lost", requeue_if_lost)
    report = recovery.sweep()

    assert (report.abandoned, report.closed, report.recovered, report.given_up) == (1, 1, 1, 1)
    assert Run.objects.filter(previous_run=crashed, status=RunStatus.QUEUED).exists()
    bad.refresh_from_db()
    execution = Execution.objects.get(pk=bad.execution_id)
    assert (bad.status, bad.failure_code) == (RunStatus.FAILED, SWEEP_FAILED)
    assert (execution.status, execution.failure_code) == (ExecutionStatus.FAILED, SWEEP_FAILED)
    assert "OverflowError" in execution.failure_message
    # The failed row is no longer the sweeper's: the next pass has nothing to give up.
    assert recovery.sweep().given_up == 0


def test_a_row_that_fails_mid_sweep_ends_its_open_lane(monkeypatch):
    bad, good = crashed_run(monkeypatch), crashed_run(monkeypatch)
    real_abandon = recovery.abandon

    def abandon(run, *, now):
        if run.pk == bad.pk:
            raise ValueError("undecodable lease")
        return real_abandon(run, now=now)

    monkeypatch.setattr(recovery, "abandon", abandon)
    report = recovery.sweep()

    assert (report.abandoned, report.given_up) == (1, 1)
    bad.refresh_from_db()
    assert (bad.status, bad.failure_code, bad.lease_token) == (RunStatus.FAILED, SWEEP_FAILED, None)
    last = TimelineEvent.objects.filter(run=bad).order_by("-position").first()
    assert (last.event_type, last.event["code"]) == ("RUN_ERROR", SWEEP_FAILED)
    good.refresh_from_db()
    assert good.status == RunStatus.ABANDONED


def test_an_outage_ends_the_pass_and_fails_nothing(monkeypatch):
    queued = old_queued_run_with_lease_seconds(30)

    def unreachable(queue, run, *, now):
        raise redis.ConnectionError("Redis is restarting")

    monkeypatch.setattr(recovery, "requeue_if_lost", unreachable)
    with pytest.raises(redis.ConnectionError):
        recovery.sweep()
    queued.refresh_from_db()
    assert queued.status == RunStatus.QUEUED and queued.failure_code == ""


def test_the_sweeper_loop_survives_a_failed_pass_and_notes_each_completed_one(monkeypatch, redis_settings):
    # An operator's Ctrl-C lands in the third pass.
    stop = KeyboardInterrupt()
    passes = iter([redis.ConnectionError("Redis is restarting"), recovery.SweepReport(abandoned=1), stop])

    def sweep():
        outcome = next(passes)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    monkeypatch.setattr(recovery, "sweep", sweep)
    out, err = io.StringIO(), io.StringIO()
    call_command("harness_recover", loop=0.01, stdout=out, stderr=err)
    assert "Redis is restarting" in err.getvalue()
    assert "abandoned 1" in out.getvalue()
    assert "sweeper stopped" in out.getvalue()
    assert len(sweeper_passes.last_passes()) == 1


def test_a_second_sweeper_on_sqlite_is_refused():
    first = sole_sweeper_on_sqlite()
    try:
        with pytest.raises(CommandError, match=r"Another sweeper \(pid \d+\) already sweeps this SQLite database"):
            call_command("harness_recover")
    finally:
        first.close()
    out = io.StringIO()
    call_command("harness_recover", stdout=out)
    assert out.getvalue().startswith("sweep:")


def test_a_job_taken_off_the_queue_by_a_worker_that_died_at_once_is_sent_again(redis_settings):
    """The worker popped the job and was killed before marking it started: "queued", but in no queue."""
    run = old_queued_run_with_lease_seconds(5)
    queue = django_rq.get_queue("default")
    queueing.send_job(run.pk)
    recovery.sweep()
    assert queue.get_job_ids() == [queueing.job_id(run.pk)], "a job still waiting in the queue is left alone"

    queue.connection.lrem(queue.key, 0, queueing.job_id(run.pk))
    assert queue.fetch_job(queueing.job_id(run.pk)).get_status() == "queued"
    report = recovery.sweep()

    assert report.requeued == 1
    assert queue.get_job_ids() == [queueing.job_id(run.pk)]
