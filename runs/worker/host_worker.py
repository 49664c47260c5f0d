"""The Host's RQ worker class: up to `HARNESS_RUNS_PER_WORKER` jobs at once, riding through a Redis restart.

Concurrency: a run spends nearly all its time waiting on its model or its tools, so a process per run (RQ's
forking worker) runs out of memory long before CPU. Here each execution is still one RQ job (in RQ's
registries, with its status and result), but the worker runs its jobs as tasks on one asyncio event loop
(`JobSlots`), taking a job only while it has a free slot. Everything that blocks stays off the loop: database
work through Django's `sync_to_async`, RQ's Redis bookkeeping in a small thread pool, sync tools in
pydantic-ai's threads. The loop is `event_loop.new_event_loop()`'s, which keeps a busy loop from starving those
threads of the GIL.

Stopping: SIGTERM (or Ctrl-C) stops taking jobs and lets the runs in flight go on for
`HARNESS_WORKER_GRACE_SECONDS`; then each is cancelled and gives its lease up, so the sweeper recovers it at
once instead of after the lease expires. A second signal ends the grace period at once.

Redis outages: every Redis command of the worker retries with capped exponential backoff until Redis answers
again (redis-py's own `Retry`), so the process waits instead of exiting and the runs in progress go on. A
restarted Redis has forgotten the worker's registration, so each heartbeat restores it when it is missing, and
/health/ and the nav badge see the worker again. The heartbeat comes every few seconds (`HEARTBEAT_SECONDS`)
and carries the worst event loop lag the runs' lease heartbeats saw since the last one (`LOOP_LAG_FIELD`).

Payloads: jobs are JSON and only the Host's own (runs/services/store/queued_jobs.py), whatever the command line says.
"""

from __future__ import annotations

import asyncio
import gc
from typing import Any

from django.conf import settings
from redis.backoff import ExponentialWithJitterBackoff
from redis.client import Pipeline
from redis.retry import Retry
from rq import worker_registration
from rq.defaults import DEFAULT_LOGGING_DATE_FORMAT, DEFAULT_LOGGING_FORMAT
from rq.job import Job
from rq.job_lifecycle import call_exception_handlers
from rq.worker.base import BaseWorker, DequeueStrategy

import runs.jobs  # noqa: F401 - loaded before the first job, not while it holds a lease
from runs.services.store import toolbox
from runs.services.store.queued_jobs import SERIALIZER, HostJob, RefusedJob
from runs.services.worker import event_loop, loop_lag

from .slots import JobSlots

__all__ = ("HostWorker",)

RETRY_FOREVER = -1
BACKOFF_BASE_SECONDS = 0.25
BACKOFF_CAP_SECONDS = 5.0
# On the way out (idle worker stopped), a stop during an outage gives up on Redis after this many tries.
RETRIES_WHEN_STOPPING = 2
JOB_MONITORING_INTERVAL_SECONDS = 10
# The collector's first threshold (CPython's default is 700 allocations). A burst of runs allocates event objects by
# the hundred thousand, and with the default a young collection ran every few hundred microseconds (bench/findings.md).
YOUNG_COLLECTION_THRESHOLD = 10_000


class HostWorker(BaseWorker):
    """An RQ worker that runs many Host jobs at once on one event loop and outlives Redis restarts."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        toolbox.tool_names()
        kwargs.setdefault("job_monitoring_interval", JOB_MONITORING_INTERVAL_SECONDS)
        # Whatever the command line says (`rqworker` defaults to pickle): only JSON Host jobs are ever decoded.
        kwargs["serializer"] = SERIALIZER
        kwargs["job_class"] = HostJob
        super().__init__(*args, **kwargs)
        self.connection.set_retry(_retry(RETRY_FOREVER))

    def work(
        self,
        burst: bool = False,
        logging_level: str | None = None,
        date_format: str = DEFAULT_LOGGING_DATE_FORMAT,
        log_format: str = DEFAULT_LOGGING_FORMAT,
        max_jobs: int | None = None,
        max_idle_time: int | None = None,
        with_scheduler: bool = False,
        dequeue_strategy: DequeueStrategy = DequeueStrategy.DEFAULT,
    ) -> bool:
        """Take and run jobs until stopped (or, with `burst`, until the queues are empty and every job ended)."""
        self.bootstrap(logging_level, date_format, log_format)
        settle_heap()
        self._dequeue_strategy = dequeue_strategy
        if with_scheduler:
            self._start_scheduler(burst, logging_level, date_format, log_format)
        slots = JobSlots(
            self, size=settings.HARNESS_RUNS_PER_WORKER, grace_seconds=settings.HARNESS_WORKER_GRACE_SECONDS
        )
        try:
            with asyncio.Runner(loop_factory=event_loop.new_event_loop) as runner:
                taken = runner.run(slots.serve(burst=burst, max_jobs=max_jobs))
        finally:
            self.teardown()
        return taken > 0

    def heartbeat(self, timeout: int | None = None, pipeline: Pipeline | None = None) -> None:
        if self.birth_date is not None and not self.connection.hexists(self.key, "birth"):
            self._register_again()
        super().heartbeat(timeout, pipeline)
        connection = pipeline if pipeline is not None else self.connection
        connection.hset(self.key, loop_lag.REGISTRATION_FIELD, f"{loop_lag.take_worst():.3f}")

    def _register_again(self) -> None:
        """Write the registration a restarted Redis lost (RQ's `register_birth` refuses a key that exists)."""
        self.log.warning("Worker %s: Redis lost this worker's registration (restarted?); registering again", self.name)
        with self.connection.pipeline() as pipeline:
            pipeline.hset(self.key, mapping={**self.serialize(), "state": self.get_state()})
            worker_registration.register(self, pipeline)
            pipeline.expire(self.key, self.worker_ttl + 60)
            pipeline.execute()

    def handle_exception(self, job: Job, *exc_info: Any) -> None:
        if isinstance(exc_info[1], RefusedJob):
            # Nothing of the job ran: one line says what was refused, without a traceback of RQ's own code.
            self.log.error("Worker %s: %s; refused, nothing ran", self.name, exc_info[1])
            call_exception_handlers(self._exc_handlers, job, *exc_info)
            return
        super().handle_exception(job, *exc_info)

    def teardown(self) -> None:
        self.connection.set_retry(_retry(RETRIES_WHEN_STOPPING))
        super().teardown()  # type: ignore[no-untyped-call]  # rq leaves it unannotated


def settle_heap() -> None:
    """Freeze what the process loaded before its first job, and collect young garbage less often.

    Django, the models, pydantic-ai and RQ live as long as the process. Frozen, the collector no longer walks them
    on each full collection: with 100 runs in flight those paused the event loop, and every run on it, for about
    100 ms each. The runs' own objects are collected as before.
    """
    gc.collect()
    gc.freeze()
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, middle, oldest)


def _retry(retries: int) -> Retry:
    return Retry(ExponentialWithJitterBackoff(base=BACKOFF_BASE_SECONDS, cap=BACKOFF_CAP_SECONDS), retries)
