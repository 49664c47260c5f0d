"""The Host's RQ worker class: job code preloaded before forking, and riding through a Redis restart.

Preloading: without it every forked work-horse imports pydantic-ai and the engine anew while it already holds
a run's lease; preloading keeps the first heartbeat well inside short leases.

Redis outages: RQ's worker quits on most Redis errors outside its dequeue loop (a heartbeat while a job
runs, the suspension check, the job's bookkeeping). Here every Redis command of the worker, and of the
work-horses it forks, retries with capped exponential backoff until Redis answers again (redis-py's own
`Retry`), so the process waits instead of exiting and a run in progress finishes. A restarted Redis has
forgotten the worker's registration, so each heartbeat restores it when it is missing, and /health/ and
the nav badge see the worker again. The heartbeat comes at least every `dequeue_timeout` seconds while
idle (`worker_ttl - 15`; `--worker-ttl 20` in deploy/supervisord.conf makes that 5 s) and every
`job_monitoring_interval` while a job runs.

Payloads: jobs are JSON and only the Host's own (runs/services/store/queued_jobs.py), whatever the command line says.

Selected with `RQ = {"WORKER_CLASS": "runs.worker.HostWorker"}` in the settings.
"""

from typing import Any

from redis.backoff import ExponentialWithJitterBackoff
from redis.client import Pipeline
from redis.retry import Retry
from rq import Worker, worker_registration
from rq.job import Job
from rq.job_lifecycle import call_exception_handlers

import runs.jobs  # noqa: F401 - preloaded for every forked work-horse
from runs.services.store import toolbox
from runs.services.store.queued_jobs import SERIALIZER, HostJob, RefusedJob

RETRY_FOREVER = -1
BACKOFF_BASE_SECONDS = 0.25
BACKOFF_CAP_SECONDS = 5.0
# On the way out (idle worker stopped), a stop during an outage gives up on Redis after this many tries.
RETRIES_WHEN_STOPPING = 2
JOB_MONITORING_INTERVAL_SECONDS = 10


class HostWorker(Worker):
    """An RQ worker whose work-horses start with the Host's code loaded and which outlives Redis restarts."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        toolbox.tool_names()
        kwargs.setdefault("job_monitoring_interval", JOB_MONITORING_INTERVAL_SECONDS)
        # Whatever the command line says (`rqworker` defaults to pickle): only JSON Host jobs are ever decoded.
        kwargs["serializer"] = SERIALIZER
        kwargs["job_class"] = HostJob
        super().__init__(*args, **kwargs)
        self.connection.set_retry(_retry(RETRY_FOREVER))

    def heartbeat(self, timeout: int | None = None, pipeline: Pipeline | None = None) -> None:
        if not self.is_horse and self.birth_date is not None and not self.connection.hexists(self.key, "birth"):
            self._register_again()
        super().heartbeat(timeout, pipeline)

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


def _retry(retries: int) -> Retry:
    return Retry(ExponentialWithJitterBackoff(base=BACKOFF_BASE_SECONDS, cap=BACKOFF_CAP_SECONDS), retries)
