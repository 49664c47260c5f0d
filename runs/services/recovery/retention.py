"""The retention pass: purge the journal, timeline and checkpoints of executions past their team's retention.

An execution is first marked purged (its `ExecutionTombstone`, with its usage and cost) in a transaction of its own,
together with its Host-managed children, so from then on every page shows it as purged rather than as a timeline
with holes. Its rows then go in chunks of `HARNESS_RETENTION_CHUNK_SIZE`, each chunk a short transaction of its own
(concurrent runs' writes wait at most one chunk): timeline events, journal entries, then the checkpoints nothing
kept depends on. A pass killed between chunks leaves a tombstone without `finished_at`, and the next pass goes on
from there before it marks anything new. Runs, decisions and the requests they answer stay: they are the audit.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Model, QuerySet
from django.utils import timezone

from runs.models import Checkpoint, Execution, ExecutionTombstone, JournalEntry, Run, TimelineEvent

from ..reports import costs
from .retention_scope import Due, due_families, purgeable_checkpoints, unheld

__all__ = ("RetentionReport", "run_pass")

# The least pause between two chunks on SQLite: longer than a waiting writer's longest sleep between two retries.
SQLITE_PAUSE_SECONDS = 0.11


@dataclass
class RetentionReport:
    purged: int = 0
    timeline_events: int = 0
    journal_entries: int = 0
    checkpoints: int = 0
    # Marked purged but with rows left: the pass ran out of chunks, the next one goes on.
    left: int = 0

    def __str__(self) -> str:
        return ", ".join(f"{name.replace('_', ' ')} {value}" for name, value in vars(self).items())


class _OutOfChunks(Exception):
    pass


@dataclass
class _Deleter:
    chunk_size: int
    max_chunks: int | None
    after_chunk: Callable[[], None] | None
    report: RetentionReport
    chunks: int = 0

    def _take(self) -> None:
        if self.max_chunks is not None and self.chunks >= self.max_chunks:
            raise _OutOfChunks
        self.chunks += 1

    def _chunk(self, tombstone: ExecutionTombstone, model: type[Model], ids: list[int], counter: str) -> None:
        started = time.monotonic()
        with transaction.atomic():
            _, deleted = model._default_manager.filter(pk__in=ids).delete()
            count = deleted.get(model._meta.label, 0)
            ExecutionTombstone.objects.filter(pk=tombstone.pk).update(**{counter: F(counter) + count})
        if connection.vendor == "sqlite":
            # SQLite has one writer, and a waiting one retries only now and then (its busy handler sleeps up to
            # 100 ms): without a pause the next chunk takes the lock again first, and runs' writes starve.
            time.sleep(max(time.monotonic() - started, SQLITE_PAUSE_SECONDS))
        setattr(self.report, counter, getattr(self.report, counter) + count)
        if self.after_chunk is not None:
            self.after_chunk()

    def _drain(self, tombstone: ExecutionTombstone, rows: QuerySet[Model], counter: str) -> None:
        while True:
            self._take()
            ids = list(rows.order_by().values_list("pk", flat=True)[: self.chunk_size])
            if not ids:
                self.chunks -= 1
                return
            self._chunk(tombstone, rows.model, ids, counter)

    def purge(self, tombstone: ExecutionTombstone, now: datetime) -> None:
        execution_id = tombstone.execution_id
        self._drain(tombstone, TimelineEvent.objects.filter(execution_id=execution_id), "timeline_events")
        self._drain(tombstone, JournalEntry.objects.filter(run__execution_id=execution_id), "journal_entries")
        doomed = purgeable_checkpoints(Execution.objects.get(pk=execution_id))
        for start in range(0, len(doomed), self.chunk_size):
            self._take()
            self._chunk(tombstone, Checkpoint, doomed[start : start + self.chunk_size], "checkpoints")
        with transaction.atomic():
            # What a run answered and was resumed with is content like its journal; its usage and status stay.
            Run.objects.filter(execution_id=execution_id).update(output=None, deferred_resume=None)
            ExecutionTombstone.objects.filter(pk=tombstone.pk).update(finished_at=now)
        self.report.purged += 1


def _mark(due: Due, now: datetime) -> list[ExecutionTombstone]:
    """Tombstones for the whole family in one transaction, or none when a hold or another sweeper came first."""
    pks = [execution.pk for execution in due.family]
    with transaction.atomic():
        locked = list(unheld(Execution.objects.select_for_update(of=("self",)).filter(pk__in=pks)).order_by())
        if len(locked) != len(pks):
            return []
        by_pk = {execution.pk: execution for execution in locked}
        tombstones = []
        for pk in pks:
            execution = by_pk[pk]
            usage = costs.usage_of(Run.objects.filter(execution_id=pk))
            tombstones.append(
                ExecutionTombstone.objects.create(
                    execution=execution,
                    purged_at=now,
                    retention_days=due.retention_days,
                    outcome=execution.status,
                    requests=usage.requests,
                    input_tokens=usage.input_tokens,
                    output_tokens=usage.output_tokens,
                    cache_read_tokens=usage.cache_read_tokens,
                    cache_write_tokens=usage.cache_write_tokens,
                    cost=usage.cost,
                )
            )
        return tombstones


def run_pass(
    *,
    now: datetime | None = None,
    chunk_size: int | None = None,
    max_chunks: int | None = None,
    after_chunk: Callable[[], None] | None = None,
) -> RetentionReport:
    """Finish what an earlier pass left, then purge every due execution, at most `max_chunks` chunks in all.

    `after_chunk` is called after each committed chunk (a test stops the pass there as kill -9 would).
    """
    now = now or timezone.now()
    report = RetentionReport()
    deleter = _Deleter(chunk_size or settings.HARNESS_RETENTION_CHUNK_SIZE, max_chunks, after_chunk, report)
    try:
        for tombstone in ExecutionTombstone.objects.filter(finished_at=None).order_by("pk"):
            deleter.purge(tombstone, now)
        for due in due_families(now):
            for tombstone in _mark(due, now):
                deleter.purge(tombstone, now)
    except _OutOfChunks:
        pass
    report.left = ExecutionTombstone.objects.filter(finished_at=None).count()
    return report
