"""Run leases: the fence that keeps a stale worker from writing.

A worker owns a Run while it holds an unexpired lease token. Every write of the worker (journal, timeline,
checkpoints, pointers, the result) first re-checks the lease with a conditional UPDATE inside the same
transaction, so once the sweeper has taken the lease away nothing the old worker does can land.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import timedelta
from functools import cache

from django.db import connection, models, transaction
from django.db.models import QuerySet
from django.utils import timezone

from runs.models import Execution, ExecutionStatus, Run, RunStatus

__all__ = ("Lease", "LeaseLost", "acquire", "give_up", "release", "renew", "verify")


class LeaseLost(RuntimeError):
    """The worker no longer holds the run's lease (expired, taken over, or the run was finished)."""

    def __init__(self, run_pk: int, what: str) -> None:
        super().__init__(f"refused to {what} for run {run_pk}: this worker's lease is expired or was taken over")
        self.run_pk = run_pk


@dataclass(frozen=True, slots=True)
class Lease:
    run_pk: int
    execution_pk: int
    token: str
    seconds: int


def _held(lease: Lease) -> QuerySet[Run]:
    return Run.objects.filter(pk=lease.run_pk, lease_token=lease.token, lease_expires_at__gt=timezone.now())


def acquire(run_pk: int) -> Lease | None:
    """Take the lease of a queued run and mark it (and its execution) running; `None` if it is not queued."""
    token = secrets.token_hex(16)
    with transaction.atomic():
        run = Run.objects.select_related("policy_version").filter(pk=run_pk).first()
        if run is None:
            return None
        seconds = run.policy_version.lease_seconds
        now = timezone.now()
        taken = Run.objects.filter(pk=run_pk, status=RunStatus.QUEUED, lease_token__isnull=True).update(
            status=RunStatus.RUNNING,
            lease_token=token,
            lease_expires_at=now + timedelta(seconds=seconds),
            heartbeat_at=now,
            started_at=now,
        )
        if not taken:
            return None
        Execution.objects.filter(
            pk=run.execution_id,
            status__in=(ExecutionStatus.QUEUED, ExecutionStatus.RECOVERING, ExecutionStatus.WAITING),
        ).update(status=ExecutionStatus.RUNNING)
    return Lease(run_pk=run_pk, execution_pk=run.execution_id, token=token, seconds=seconds)


def verify(lease: Lease, what: str) -> None:
    """Inside a transaction: refuse the write unless the lease is still held (and lock the run row)."""
    # `_held(lease).update(heartbeat_at=now)` as one statement written once: every write of every run checks its
    # lease on the one database thread a worker's runs share, and the ORM building this UPDATE anew each time was
    # about a fifth of that thread's work (bench/findings.md).
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    with connection.cursor() as cursor:
        cursor.execute(_verify_statement(), [now, lease.run_pk, lease.token, now])
        held = cursor.rowcount
    if not held:
        raise LeaseLost(lease.run_pk, what)


@cache
def _verify_statement() -> str:
    quote = connection.ops.quote_name

    def column(name: str) -> str:
        field = Run._meta.get_field(name)
        assert isinstance(field, models.Field) and field.column is not None, name
        return quote(field.column)

    return (
        f"UPDATE {quote(Run._meta.db_table)} SET {column('heartbeat_at')} = %s "
        f"WHERE {column('id')} = %s AND {column('lease_token')} = %s AND {column('lease_expires_at')} > %s"
    )


def renew(lease: Lease) -> None:
    """Heartbeat: push the expiry forward, or raise `LeaseLost`."""
    now = timezone.now()
    if not _held(lease).update(heartbeat_at=now, lease_expires_at=now + timedelta(seconds=lease.seconds)):
        raise LeaseLost(lease.run_pk, "renew the lease")


def release(lease: Lease, status: RunStatus, **fields: object) -> None:
    """Inside a transaction: finish the run with `status` and give the lease up (refused if lost)."""
    done = _held(lease).update(
        status=status, lease_token=None, lease_expires_at=None, finished_at=timezone.now(), **fields
    )
    if not done:
        raise LeaseLost(lease.run_pk, f"record the run as {status}")


def give_up(held: list[Lease]) -> int:
    """Expire these leases now, so the sweeper's next pass recovers their runs; returns how many were still held.

    Whatever their holder still tries to write is refused: each of its writes re-checks the lease first.
    """
    now = timezone.now()
    given_up = 0
    with transaction.atomic():
        for lease in held:
            given_up += _held(lease).update(lease_expires_at=now)
    return given_up
