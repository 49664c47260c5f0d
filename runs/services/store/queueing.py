"""Handing runs to the RQ queue, and knowing whether the queue (Redis) can be reached.

A run's rows are committed first and its job is sent after, from a `transaction.on_commit` hook. A queue that
cannot be reached then leaves the run `queued` in the database instead of failing the request that started
it: the sweeper (`recovery.requeue_if_lost`) sends the job again once Redis answers. Whoever wants to tell
the user what happened collects the outcome with `reporting()`.

`queue_reachable()` is the cheap, briefly cached check behind the banner every page shows while Redis is
down; it must never make a page slow or fail it.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import django_rq
import redis
from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from redis.backoff import NoBackoff
from redis.exceptions import RedisError
from redis.retry import Retry
from rq import Queue
from rq.job import JobStatus

from runs.models import Execution, ExecutionStatus, Run, RunStatus

from .queued_jobs import SERIALIZER, HostJob

__all__ = (
    "UNREACHABLE_NOTICE",
    "DispatchReport",
    "enqueue_remask",
    "enqueue_run",
    "held_back",
    "host_queue",
    "job_id",
    "job_missing",
    "queue_reachable",
    "reporting",
    "send_job",
    "waiting_for_queue",
)

log = logging.getLogger(__name__)

QUEUE_NAME = "default"
REACHABLE_CACHE_KEY = "harness:queue-reachable"
REACHABLE_CACHE_SECONDS = 2
# A ping that takes longer than this counts as "unreachable": the banner must not hold a page up.
PING_TIMEOUT_SECONDS = 0.3
UNREACHABLE_NOTICE = (
    "The queue (Redis) cannot be reached right now. The execution is saved and queued; "
    "it starts on its own once the queue is back."
)
_LIVE_JOB_STATUSES = (JobStatus.QUEUED, JobStatus.SCHEDULED, JobStatus.STARTED)


def job_id(run_pk: int) -> str:
    return f"harness-run-{run_pk}"


@dataclass
class DispatchReport:
    """The runs committed inside `reporting()` whose job could not be sent because Redis was unreachable."""

    failed: list[int] = field(default_factory=list)

    @property
    def queue_unreachable(self) -> bool:
        return bool(self.failed)


_report: contextvars.ContextVar[DispatchReport | None] = contextvars.ContextVar("dispatch_report", default=None)
_held_back: contextvars.ContextVar[bool] = contextvars.ContextVar("jobs_held_back", default=False)


@contextmanager
def reporting() -> Iterator[DispatchReport]:
    """Collect what happens to the jobs of runs committed inside the block (the hooks run at commit)."""
    report = DispatchReport()
    token = _report.set(report)
    try:
        yield report
    finally:
        _report.reset(token)


@contextmanager
def held_back() -> Iterator[None]:
    """Runs committed inside the block get no job, because the caller runs them itself (the demo's crashed run
    plays its own worker): a listening worker would otherwise take the lease first. A run nobody takes is sent by
    the sweeper once it is a lease old (`requeue_if_lost`)."""
    token = _held_back.set(True)
    try:
        yield
    finally:
        _held_back.reset(token)


def host_queue(**options: Any) -> Queue:
    """The Host's queue: its jobs travel as JSON and only Host jobs decode (queued_jobs.py), whatever RQ_QUEUES
    says."""
    return django_rq.get_queue(QUEUE_NAME, serializer=SERIALIZER, job_class=HostJob, **options)


def send_job(run_pk: int) -> bool:
    """Enqueue the run's job now; False (logged, and remembered for the banner) when Redis cannot be reached."""
    queue = host_queue(commit_mode="auto")
    try:
        queue.enqueue("runs.jobs.execute_run", run_pk, job_id=job_id(run_pk))
    except RedisError as exc:
        log.warning("run %s stays queued: the queue cannot be reached (%s); the sweeper sends it later", run_pk, exc)
        _remember_reachable(False)
        return False
    _remember_reachable(True)
    return True


def enqueue_bulk_operation(operation_pk: int) -> None:
    """Send a bulk operation's job once the surrounding transaction commits (logged if Redis is unreachable)."""
    _enqueue_on_commit("runs.jobs.run_bulk_operation", operation_pk, "bulk operation")


def enqueue_remask(remask_pk: int) -> None:
    """Send a re-mask's job once the surrounding transaction commits (logged if Redis is unreachable)."""
    _enqueue_on_commit("runs.jobs.remask_executions", remask_pk, "re-mask")


def _enqueue_on_commit(function: str, pk: int, what: str) -> None:
    def send() -> None:
        try:
            host_queue(commit_mode="auto").enqueue(function, pk)
        except RedisError as exc:
            log.warning("%s %s waits: the queue cannot be reached (%s)", what, pk, exc)
            _remember_reachable(False)

    transaction.on_commit(send)


def enqueue_run(run: Run) -> None:
    """Send the run's job once the surrounding transaction commits; a failure never undoes or fails the commit."""
    if _held_back.get():
        return
    report = _report.get()
    run_pk = run.pk

    def send() -> None:
        if not send_job(run_pk) and report is not None:
            report.failed.append(run_pk)

    transaction.on_commit(send)


def queue_reachable() -> bool:
    """Whether Redis answered a ping within PING_TIMEOUT_SECONDS, remembered for REACHABLE_CACHE_SECONDS."""
    known: bool | None = cache.get(REACHABLE_CACHE_KEY)
    if known is None:
        known = _ping()
        _remember_reachable(known)
    return known


def _remember_reachable(reachable: bool) -> None:
    cache.set(REACHABLE_CACHE_KEY, reachable, REACHABLE_CACHE_SECONDS)


def _ping() -> bool:
    client = redis.Redis.from_url(
        settings.RQ_QUEUES[QUEUE_NAME]["URL"],
        socket_connect_timeout=PING_TIMEOUT_SECONDS,
        socket_timeout=PING_TIMEOUT_SECONDS,
        retry=Retry(NoBackoff(), 0),
    )
    try:
        return bool(client.ping())
    except RedisError:
        return False
    finally:
        client.close()


def job_missing(run: Run) -> bool:
    """Whether a queued run has no live job: it is not in the queue, or the queue cannot be reached."""
    if not queue_reachable():
        return True
    try:
        job = host_queue().fetch_job(job_id(run.pk))
    except RedisError:
        return True
    return job is None or job.get_status(refresh=False) not in _LIVE_JOB_STATUSES


def waiting_for_queue(execution: Execution) -> bool:
    """A queued execution whose run has no live job: it waits for Redis (or the sweeper) to queue it again."""
    if execution.status != ExecutionStatus.QUEUED:
        return False
    run = execution.runs.filter(status=RunStatus.QUEUED).order_by("-number").first()
    return run is not None and job_missing(run)
