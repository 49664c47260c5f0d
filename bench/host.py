"""Django for the benchmark processes: a private database, and host rows for one benchmark run.

Each suite process runs against its own fresh database (a temporary SQLite file or a database on the
temporary PostgreSQL cluster), so runs are comparable and nothing touches the developer's data.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

__all__ = ("as_worker", "configure", "discard", "leased_run", "seed_checkpoints", "seed_journal")

T = TypeVar("T")

LONG_LEASE_SECONDS = 3600


def configure(database_url: str, redis_url: str) -> None:
    """Point the settings at the benchmark database and Redis, set Django up and migrate."""
    os.environ["DATABASE_URL"] = database_url
    os.environ["REDIS_URL"] = redis_url
    os.environ["DJANGO_SETTINGS_MODULE"] = "harness_site.settings"
    # Benchmarks drive async code from plain scripts; the ORM calls happen where a test would make them.
    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0, interactive=False)


def as_worker(main: Callable[[], Awaitable[T]]) -> T:
    """`main()` run as the RQ worker runs a job: on the worker's event loop, its database work in Django's thread."""
    from runs.services.worker import event_loop

    async def run() -> T:
        return await main()

    with asyncio.Runner(loop_factory=event_loop.new_event_loop) as runner:
        return runner.run(run())


def leased_run(thread_id: str, run_id: str) -> tuple[Any, Any]:
    """A new thread, execution and queued run for `run_id`, with the run's lease taken: `(run, lease)`."""
    from django.db.models import Max

    from runs.models import AgentProfile, Execution, HostPolicy, HostPolicyVersion, Run, Thread
    from runs.services.store import leases

    profile, _ = AgentProfile.objects.get_or_create(name="bench", defaults={"model": "demo"})
    policy, _ = HostPolicy.objects.get_or_create(name="default")
    # A long lease: a 100k-item write (or one slowed by a thousand viewers) must not lose it half way through a
    # measurement. A version of its own, since an earlier benchmark's executions may have made version 1 with the
    # default lease.
    version = policy.versions.filter(lease_seconds=LONG_LEASE_SECONDS).first()
    if version is None:
        number = (policy.versions.aggregate(Max("number"))["number__max"] or 0) + 1
        version = HostPolicyVersion.objects.create(policy=policy, number=number, lease_seconds=LONG_LEASE_SECONDS)
    thread = Thread.objects.create(thread_id=thread_id, profile=profile)
    execution = Execution.objects.create(
        thread=thread, number=1, input="bench", shown_input="bench", policy_version=version
    )
    run = Run.objects.create(execution=execution, number=1, run_id=run_id, policy_version=version)
    lease = leases.acquire(run.pk)
    assert lease is not None
    run.refresh_from_db()
    return run, lease


def discard(thread_id: str) -> None:
    """Delete a benchmark thread and everything under it with plain SQL (the ORM's cascade is slow at 100k rows).

    Every repetition writes the same synthetic ids again, into tables of the same size.
    """
    from django.db import connection, transaction

    from runs.models import Checkpoint, Execution, JournalEntry, Run, Thread, TimelineEvent

    thread_pks = list(Thread.objects.filter(thread_id=thread_id).values_list("pk", flat=True))
    if not thread_pks:
        return
    execution_pks = list(Execution.objects.filter(thread_id__in=thread_pks).values_list("pk", flat=True))
    run_pks = list(Run.objects.filter(execution_id__in=execution_pks).values_list("pk", flat=True))
    with transaction.atomic(), connection.cursor() as cursor:
        Thread.objects.filter(pk__in=thread_pks).update(selected_checkpoint=None)
        for model, column, keys in (
            (TimelineEvent, "execution_id", execution_pks),
            (Checkpoint, "thread_id", thread_pks),
            (JournalEntry, "run_id", run_pks),
            (Run, "execution_id", execution_pks),
            (Execution, "thread_id", thread_pks),
            (Thread, "id", thread_pks),
        ):
            if keys:
                marks = ", ".join(["%s"] * len(keys))
                cursor.execute(f"DELETE FROM {model._meta.db_table} WHERE {column} IN ({marks})", keys)


def seed_journal(run: Any, encoded: Any) -> None:
    """Insert already-encoded items as the run's journal, quickly (setup for read benchmarks, not timed)."""
    from runs.models import JournalEntry

    JournalEntry.objects.bulk_create(
        [
            JournalEntry(
                run=run,
                index=index,
                source_run_id=entry.source_run_id,
                source_sequence=entry.source_sequence,
                kind=entry.kind,
                occurred_at=entry.occurred_at,
                payload=entry.payload,
                codec_version=entry.codec_version,
            )
            for index, entry in enumerate(encoded)
        ],
        batch_size=2000,
    )


def seed_checkpoints(run: Any, synthetic: Any) -> None:
    """Store a synthetic run's boundary states and its end as the run's checkpoints, a chain of deltas and bases as
    the write path stores them (setup, not timed)."""
    from runs.models import CheckpointKind
    from runs.services.store import checkpoints

    thread = run.execution.thread
    chain = checkpoints.CheckpointChain()
    for boundary in synthetic.boundaries:
        checkpoints.create(
            thread, boundary.state, kind=CheckpointKind.BOUNDARY, run=run, pending=boundary.pending, chain=chain
        )
    checkpoints.create(thread, synthetic.items[-1].result.state, kind=CheckpointKind.TERMINAL, run=run, chain=chain)
