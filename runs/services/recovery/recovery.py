"""The recovery sweep: what happens when a worker dies.

A run whose lease expired is marked abandoned in one conditional UPDATE (after which its old worker can
write nothing). Its projection is then closed: a fresh observer is rebuilt with `resume()` over the run's
journal prefix and given the terminal item a failed run would have had, so the lane ends with the events
the observer itself produces (open messages ended, then RUN_ERROR) — stored without a journal entry, since
the harness never produced that item. After a backoff, a new Run of the same execution (new run_id, new
observer) starts from the latest checkpoint with the policy's `tool_recovery` and any accepted deferred
input marked `recovery=True`; after `max_attempts` the execution fails with a clear reason. Queued runs
whose RQ job was lost with its worker are enqueued again (taking the lease is idempotent).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone
from rq import Queue
from rq.job import Job, JobStatus

from runs.models import (
    Execution,
    ExecutionStatus,
    JournalEntry,
    Run,
    RunStatus,
    TimelineEvent,
)

from ..lifecycle import start_recovery_run
from ..lifecycle.approvals import expire_request_set, overdue_sets
from ..lifecycle.children import answer_parent
from ..store import queueing
from ..store.host_events import HostEvent, announce, pass_swept
from ..timeline.lane_closing import TERMINAL_EVENTS, WORKER_LOST, close_projection, lane_closed
from ..timeline.publishing import publish_execution_status
from .sweep_failures import give_up, is_transient

__all__ = ("SweepReport", "sweep")

log = logging.getLogger(__name__)

RECOVERY_EXHAUSTED = "recovery_exhausted"
MAX_BACKOFF_SECONDS = 60.0


@dataclass
class SweepReport:
    abandoned: int = 0
    closed: int = 0
    recovered: int = 0
    failed: int = 0
    requeued: int = 0
    expired_requests: int = 0
    given_up: int = 0

    def __str__(self) -> str:
        return ", ".join(f"{name.replace('_', ' ')} {value}" for name, value in vars(self).items())


@contextmanager
def _guard(report: SweepReport, *, execution_pk: int, run_pk: int | None, step: str) -> Iterator[None]:
    """Sweep one row: if it fails for a reason of its own, fail that row and go on with the next one."""
    try:
        yield
    except Exception as error:
        if is_transient(error):
            raise
        give_up(execution_pk=execution_pk, run_pk=run_pk, step=step, error=error)
        report.given_up += 1


def sweep(*, now: datetime | None = None) -> SweepReport:
    """One pass over every run and execution that needs the sweeper; safe to run concurrently and repeatedly.

    Each row is handled in its own guard (see `sweep_failures`); an outage of the database or Redis ends
    the pass with its exception.
    """
    now = now or timezone.now()
    report = SweepReport()
    for execution_pk, checkpoint_pk in overdue_sets(now):
        with _guard(report, execution_pk=execution_pk, run_pk=None, step="expire its overdue approval requests"):
            report.expired_requests += expire_request_set(execution_pk, checkpoint_pk)
    for run in Run.objects.filter(status=RunStatus.RUNNING, lease_expires_at__lt=now):
        with _guard(report, execution_pk=run.execution_id, run_pk=run.pk, step="take the expired lease away"):
            report.abandoned += abandon(run, now=now)
    lanes = TimelineEvent.objects.filter(run=OuterRef("pk"), subagent_run_id="", event_type__in=TERMINAL_EVENTS)
    for run in Run.objects.filter(status=RunStatus.ABANDONED).exclude(run_id=None).exclude(Exists(lanes)):
        with _guard(report, execution_pk=run.execution_id, run_pk=run.pk, step="close the dead run's lane"):
            report.closed += close_projection(run)
    for execution in Execution.objects.filter(status=ExecutionStatus.RECOVERING):
        with _guard(report, execution_pk=execution.pk, run_pk=None, step="start a recovery run"):
            outcome = continue_execution(execution, now=now)
            report.recovered += outcome == "recovered"
            report.failed += outcome == "failed"
    queue = queueing.host_queue()
    for run in Run.objects.filter(status=RunStatus.QUEUED).select_related("policy_version"):
        with _guard(report, execution_pk=run.execution_id, run_pk=run.pk, step="enqueue the queued run again"):
            report.requeued += requeue_if_lost(queue, run, now=now)
    pass_swept(now)
    return report


def abandon(run: Run, *, now: datetime) -> bool:
    """Take the expired lease away and hand the execution to recovery; False if the worker renewed it."""
    with transaction.atomic():
        taken = Run.objects.filter(
            pk=run.pk, status=RunStatus.RUNNING, lease_token=run.lease_token, lease_expires_at__lt=now
        ).update(
            status=RunStatus.ABANDONED,
            lease_token=None,
            lease_expires_at=None,
            finished_at=now,
            failure_code=WORKER_LOST,
            failure_message="The worker running this run stopped renewing its lease.",
        )
        if not taken:
            return False
        Execution.objects.filter(pk=run.execution_id, status=ExecutionStatus.RUNNING).update(
            status=ExecutionStatus.RECOVERING
        )
        publish_execution_status(run.execution_id)
    log.info("run %s (%s) abandoned: lease expired", run.pk, run.run_id)
    return True


def backoff(attempt: int) -> timedelta:
    base = settings.HARNESS_RECOVERY_BACKOFF_SECONDS
    return timedelta(seconds=min(base * 2 ** (attempt - 1), MAX_BACKOFF_SECONDS))


def continue_execution(execution: Execution, *, now: datetime) -> str | None:
    """Start the recovery run of a recovering execution once its backoff passed, or fail it after the limit."""
    with transaction.atomic():
        # Only the execution's row is locked (not its policy version's, which other executions share); one
        # that another sweeper holds is skipped in this pass.
        locked = (
            Execution.objects.select_for_update(skip_locked=True, of=("self",))
            .select_related("policy_version", "thread")
            .filter(pk=execution.pk)
            .first()
        )
        if locked is None:
            return None
        execution = locked
        dead = execution.runs.order_by("-number").first()
        if execution.status != ExecutionStatus.RECOVERING or dead is None or dead.status != RunStatus.ABANDONED:
            return None
        max_attempts = execution.policy_version.max_attempts
        if dead.attempt >= max_attempts:
            message = (
                f"The worker stopped during {dead.attempt} attempts of this execution; recovery gave up after "
                f"the policy's limit of {max_attempts} attempts."
            )
            Execution.objects.filter(pk=execution.pk).update(
                status=ExecutionStatus.FAILED, finished_at=now, failure_code=RECOVERY_EXHAUSTED, failure_message=message
            )
            publish_execution_status(execution.pk)
            announce(HostEvent.EXECUTION_FAILED, execution=execution.pk)
            answer_parent(execution.pk)
            return "failed"
        if dead.finished_at is not None and now < dead.finished_at + backoff(dead.attempt):
            return None
        if not lane_closed(dead) and JournalEntry.objects.filter(run=dead, source_run_id=dead.run_id).exists():
            # Its lane is closed first, so the dead run's last positions never interleave with the successor's.
            return None
        run = start_recovery_run(execution, dead)
    log.info("execution %s: recovery run %s after run %s", execution.pk, run.pk, dead.pk)
    return "recovered"


def requeue_if_lost(queue: Queue, run: Run, *, now: datetime) -> bool:
    """Enqueue a queued run again if its job is gone or stuck: its worker died before taking the lease, Redis
    lost the job in a restart, or Redis could not be reached when the run was started.

    A job that is still started may just be slow to take the lease; enqueueing it again is harmless because
    only one job can take a queued run's lease. While Redis cannot be reached, `fetch_job` raises and the pass
    ends (see `sweep`); the next pass after Redis is back sends the job.
    """
    if run.created_at > now - timedelta(seconds=run.policy_version.lease_seconds):
        return False
    job = queue.fetch_job(queueing.job_id(run.pk))
    if job is not None and _waiting_for_a_worker(queue, job):
        return False
    return queueing.send_job(run.pk)


def _waiting_for_a_worker(queue: Queue, job: Job) -> bool:
    # A worker killed between taking the job off the queue and marking it started leaves it "queued" but in no
    # queue: only a job that is still in the queue's list (or scheduled) will be picked up.
    status = job.get_status(refresh=False)
    if status == JobStatus.SCHEDULED:
        return True
    return status == JobStatus.QUEUED and queue.get_job_position(job.id) is not None
