"""Benchmark 1: the journal write path, against a bulk insert of the same rows with the database driver.

The subject replays a cached synthetic run through the worker's write path as `runner._work` drives it
(`bench.writer`): batches written by `RunProjection.record` (lease check, journal append, AG-UI projection into
timeline rows, one transaction, publication to the real Redis channel layer after commit), boundary
checkpoints with the state the stream exported there, and the result. Only the engine is left out (its items
and boundary states were produced beforehand), so the figure is the Host's own cost per item.

The baseline inserts the same encoded journal rows with the raw driver (sqlite3 `executemany`, psycopg
`COPY`) in one transaction: the fastest way this machine can make those rows durable.

Growth is measured as the cost of the *last* `WINDOW` items of a run of 1k, 10k or 100k items: the run's
earlier items are already journaled and projected (seeded untimed), so the window is written at the depth
a real run would have reached. That is what "cost per item at 100k" means for a write path, and it keeps the
full suite inside its time budget.
"""

from __future__ import annotations

import copy
import sqlite3
from datetime import timedelta

from asgiref.sync import async_to_sync

from .context import Context
from .measure import Comparison, Report, Target, measure_pair, stopwatch
from .synthetic import SIZES, SyntheticRun, synthetic_run
from .writer import write_like_worker

__all__ = ("run",)

TARGET = Target("relative_throughput", ">=", 0.5, "host write path at least 50% of the bulk-insert baseline's items/s")
WINDOW = 1_000
QUICK_WINDOW = 300
_COLUMNS = ("run_id", "index", "source_run_id", "source_sequence", "kind", "occurred_at", "payload", "codec_version")


class _RunAtDepth:
    """A run whose first `start` items are already written, and the means to reset it to exactly that."""

    def __init__(self, synthetic: SyntheticRun, window: int) -> None:
        from django.db.models import Max

        from observers.agui import HarnessAguiStreamObserver
        from runs.models import TimelineEvent
        from runs.services.policy import redaction_processor
        from runs.services.projection import dump_event

        from .host import discard, leased_run, seed_journal

        self.synthetic = synthetic
        self.start = max(0, synthetic.size - window)
        discard(synthetic.thread_id)
        self.run, self.lease = leased_run(synthetic.thread_id, synthetic.run_id)
        self.observer = HarnessAguiStreamObserver(
            processor=redaction_processor(self.run.policy_version), retain_events=False
        )
        seed_journal(self.run, synthetic.encoded[: self.start])
        rows = []
        for item in synthetic.items[: self.start]:
            for event in self.observer.observe(item):
                dumped = dump_event(event)
                rows.append(
                    TimelineEvent(
                        execution_id=self.run.execution_id,
                        position=len(rows) + 1,
                        run=self.run,
                        subagent_run_id=dumped.get("subagentRunId", ""),
                        event_type=dumped["type"],
                        event=dumped,
                        occurred_at=item.occurred_at,
                    )
                )
        TimelineEvent.objects.bulk_create(rows, batch_size=2000)
        self.position = TimelineEvent.objects.filter(execution_id=self.run.execution_id).aggregate(m=Max("position"))
        self.position = self.position["m"] or 0

    def reset(self) -> None:
        """Delete what the window wrote and give the run its lease back (the window ends with the result)."""
        from django.db import connection, transaction
        from django.utils import timezone

        from runs.models import Checkpoint, Execution, ExecutionStatus, JournalEntry, Run, RunStatus, Thread

        run = self.run
        with transaction.atomic(), connection.cursor() as cursor:
            Thread.objects.filter(pk=run.execution.thread_id).update(selected_checkpoint=None)
            Checkpoint.objects.filter(run=run).delete()
            index = connection.ops.quote_name("index")
            cursor.execute(
                f"DELETE FROM {JournalEntry._meta.db_table} WHERE run_id = %s AND {index} >= %s", [run.pk, self.start]
            )
            cursor.execute(
                "DELETE FROM runs_timelineevent WHERE execution_id = %s AND position > %s",
                [run.execution_id, self.position],
            )
            Run.objects.filter(pk=run.pk).update(
                status=RunStatus.RUNNING,
                lease_token=self.lease.token,
                lease_expires_at=timezone.now() + timedelta(hours=1),
                finished_at=None,
            )
            Execution.objects.filter(pk=run.execution_id).update(status=ExecutionStatus.RUNNING, finished_at=None)

    def host_write(self) -> float:
        from runs.services.projection import RunProjection

        self.reset()
        # The observer's state is immutable and replaced on every item, so a shallow copy of the seeded
        # observer continues from the window's start without disturbing the next repetition's copy.
        projection = RunProjection(self.run, copy.copy(self.observer))
        # Inside async_to_sync like `runner.execute_run`: publication then reuses the worker's event loop.
        with stopwatch() as elapsed:
            async_to_sync(write_like_worker)(self.run, self.lease, projection, self.synthetic, start=self.start)
        return elapsed()

    def bulk_insert(self) -> float:
        from django.db import connection

        from runs.models import JournalEntry

        self.reset()
        table = JournalEntry._meta.db_table
        columns = ", ".join(f'"{column}"' for column in _COLUMNS)
        rows = [
            (
                self.run.pk,
                index,
                entry.source_run_id,
                entry.source_sequence,
                entry.kind,
                entry.occurred_at,
                entry.payload,
                entry.codec_version,
            )
            for index, entry in enumerate(self.synthetic.encoded[self.start :], start=self.start)
        ]
        settings = connection.settings_dict
        if connection.vendor == "sqlite":
            rows = [(*row[:5], row[5].isoformat(), *row[6:]) for row in rows]
            raw = sqlite3.connect(settings["NAME"], timeout=20)
            try:
                raw.execute("PRAGMA synchronous=NORMAL")
                marks = ", ".join("?" * len(_COLUMNS))
                with stopwatch() as elapsed, raw:
                    raw.executemany(f"INSERT INTO {table} ({columns}) VALUES ({marks})", rows)
            finally:
                raw.close()
            return elapsed()

        import psycopg

        connection_args = {"host": settings["HOST"], "port": settings["PORT"], "user": settings["USER"]}
        with psycopg.connect(**connection_args, dbname=settings["NAME"]) as raw, stopwatch() as elapsed:
            copy_sql = f"COPY {table} ({columns}) FROM STDIN"
            with raw.transaction(), raw.cursor() as cursor, cursor.copy(copy_sql) as copy_in:
                for row in rows:
                    copy_in.write_row(row)
        return elapsed()


def _checkpoint_bytes(synthetic: SyntheticRun, start: int) -> int:
    """State JSON the window's boundary checkpoints store (each holds the whole history so far)."""
    return sum(len(b.state.model_dump_json()) for b in synthetic.boundaries if b.position >= start)


def run(context: Context) -> Report:
    from .host import discard

    report = Report("journal", context.database, context.quick, context.repeats)
    window = QUICK_WINDOW if context.quick else WINDOW
    for number, size in enumerate(context.sizes):
        synthetic = synthetic_run(SIZES[size])
        depth = _RunAtDepth(synthetic, window)
        subject, baseline = measure_pair(
            depth.host_write, depth.bulk_insert, context.repeats, warmup=1 if number == 0 else 0
        )
        report.add(
            Comparison(
                name="write",
                size=size,
                items=synthetic.size - depth.start,
                subject=subject,
                baseline=baseline,
                baseline_name="driver bulk insert of the same encoded journal rows, one transaction",
                target=TARGET,
                extra={
                    "run_items": synthetic.size,
                    "window_start": depth.start,
                    "boundaries_in_window": sum(b.position >= depth.start for b in synthetic.boundaries),
                    "checkpoint_bytes_in_window": _checkpoint_bytes(synthetic, depth.start),
                },
            )
        )
        discard(synthetic.thread_id)
    report.notes.append(
        f"Each case writes the last {window} items of a run of the named size (earlier items seeded untimed), "
        "so the per-item cost is taken at that depth. Subject = the worker's write path replayed (adaptive "
        "BatchWriter batches, projection, timeline rows, boundary checkpoints, commit, publish to Redis); baseline = "
        "journal rows only, so timeline rows and checkpoints are the host's extra work."
    )
    return report
