"""What the Host's RQ queue may carry: JSON naming one of the Host's jobs, with primary keys as its arguments.

RQ's default payload is a pickle, and unpickling runs code: anyone who could write to Redis would run code in the
workers. Here jobs travel as JSON (`SERIALIZER`), and a worker runs a job only if it names one of `JOB_FUNCTIONS`
with whole numbers as arguments and nothing more (`HostJob`). Anything else read from Redis (a pickle, garbage,
another function, keyword arguments) fails as `RefusedJob` before any of it is imported or called; the worker logs
one line and takes the next job. A job record whose other fields do not decode is treated as missing. Callbacks
and webhooks found on a job are dropped: the Host sets none, and ones written into Redis would name code to import
or addresses to call.
"""

from __future__ import annotations

import logging
from typing import Any

from rq.exceptions import DeserializationError, NoSuchJobError
from rq.job import UNEVALUATED, Job
from rq.serializers import JSONSerializer

__all__ = ("JOB_FUNCTIONS", "SERIALIZER", "HostJob", "RefusedJob", "allow_job")

log = logging.getLogger(__name__)

SERIALIZER = JSONSerializer
# Every function a Host job runs, with the number of primary keys it takes.
JOB_FUNCTIONS: dict[str, int] = {
    "runs.jobs.execute_run": 1,
    "runs.jobs.run_bulk_operation": 1,
    "runs.jobs.remask_executions": 1,
}
# How much of a refused job's function name a log line repeats.
NAME_SHOWN = 80


def allow_job(name: str, arity: int) -> None:
    """Let the Host's workers run `name` too (another app's job, registered from its AppConfig.ready)."""
    JOB_FUNCTIONS[name] = arity


class RefusedJob(DeserializationError):
    """A job whose payload the Host never sends."""


class HostJob(Job):
    def _deserialize_data(self) -> None:
        try:
            super()._deserialize_data()  # type: ignore[no-untyped-call]  # rq leaves it unannotated
        except DeserializationError:
            self._forget_payload()
            raise RefusedJob(f"job {self.id}: its payload is not a job in JSON") from None
        if problem := _payload_problem(self._func_name, self._instance, self._args, self._kwargs):
            self._forget_payload()
            raise RefusedJob(f"job {self.id}: {problem}")

    def _forget_payload(self) -> None:
        # Every later read of the function or arguments decodes (and is refused) again, never using what was read.
        self._func_name = self._instance = self._args = self._kwargs = UNEVALUATED

    def restore(self, raw_data: Any) -> None:
        try:
            super().restore(raw_data)
        except NoSuchJobError:
            raise
        except Exception as exc:
            # Raised out of the worker's dequeue, any other error would stop the worker; a job that does not exist
            # is skipped (and the sweeper sends a run's job again).
            log.error("job %s refused: its record in Redis does not decode (%s)", self.id, type(exc).__name__)
            raise NoSuchJobError(f"job {self.id}: its record does not decode") from None
        self._success_callback_name = self._failure_callback_name = self._stopped_callback_name = None
        self.webhooks = []


def _payload_problem(func_name: Any, instance: Any, args: Any, kwargs: Any) -> str | None:
    arity = JOB_FUNCTIONS.get(func_name) if isinstance(func_name, str) else None
    if arity is None:
        return f"it names {str(func_name)[:NAME_SHOWN]!r}, which is not a Host job"
    if instance is not None or kwargs:
        return f"{func_name} takes no instance and no keyword arguments"
    if not isinstance(args, list) or len(args) != arity or any(type(arg) is not int for arg in args):
        return f"{func_name} takes {arity} primary key{'s' if arity > 1 else ''}"
    return None
