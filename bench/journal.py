"""Benchmark 1: the journal write path, against a bulk insert of the same rows with the database driver.

The subject replays a cached synthetic run through the worker's write path as `runner._work` drives it
(`bench.writer`): batches prepared and written by the `RunProjection` (lease check, journal append, AG-UI
projection into timeline rows, one transaction, publication to the real Redis channel layer after commit), boundary
checkpoints with the state the stream exported there, and the result. Only the engine is left out (its items
and boundary states were produced beforehand), so the figure is the Host's own cost per item.

The baseline inserts the same encoded journal rows and the same timeline rows (their AG-UI JSON encoded
beforehand) with the raw driver (sqlite3 `executemany`, psycopg `COPY`) in one transaction, into the same
database at the same depth: the fastest way this machine can make those rows durable.

At each boundary the subject also does the engine's `export_state()` work (`HistoryEncoder.encode` of the
history's messages, which keep their identity from one boundary to the next as in a live stream, and the new
envelope); the encoder is warmed up to the last boundary before the window, as a live run's would be. The
run's end (the outcome with the terminal checkpoint) is timed apart and reported as `end_ms`, so the growth
figure is the per-item cost away from the end. Every case also reports the bytes the whole run's checkpoints
take as the write path stores them (a chain of deltas and bases) against its journal's bytes.

Growth is measured as the cost of the *last* `WINDOW` items of a run of 1k, 10k or 100k items: the run's
earlier items are already journaled and projected (seeded untimed), so the window is written at the depth
a real run would have reached. That is what "cost per item at 100k" means for a write path, and it keeps the
full suite inside its time budget.
"""

from __future__ import annotations

import copy
import sqlite3
import statistics
from datetime import timedelta
from typing import Any

from .context import BenchContext
from .host import as_worker
from .measure import Comparison, Report, Target, measure_pair, stopwatch
from .synthetic import SIZES, SyntheticRun, synthetic_run
from .writer import write_like_worker

__all__ = ("run",)

TARGET = Target("relative_throughput", ">=", 0.5, "host write path at least 50% of the bulk-insert baseline's items/s")
WINDOW = 1_000
QUICK_WINDOW = 300
_COLUMNS = ("run_id", "index", "source_run_id", "source_sequence", "kind", "occurred_at", "payload", "codec_version")
_TIMELINE_COLUMNS = (
    "execution_id",
    "position",
    "run_id",
    "subagent_run_id",
    "event_type",
    "event",
    "occurred_at",
    "origin",
)


class _RunAtDepth:
    """A run whose first `start` items are already written, and the means to reset it to exactly that."""

    def __init__(self, synthetic: SyntheticRun, window: int) -> None:
        from django.db.models import Max

        from observers.agui import HarnessAguiStreamObserver
        from runs.models import TimelineEvent
        from runs.services.store import journal
        from runs.services.timeline import dump_event

        from .host import discard, leased_run, seed_journal

        self.synthetic = synthetic
        self.start = max(0, synthetic.size - window)
        discard(synthetic.thread_id)
        self.run, self.lease = leased_run(synthetic.thread_id, synthetic.run_id)
        self.observer = HarnessAguiStreamObserver(retain_events=False, fragment=False)
        seed_journal(self.run, synthetic.encoded[: self.start])
        rows: list[TimelineEvent] = []
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
        last = TimelineEvent.objects.filter(execution_id=self.run.execution_id).aggregate(m=Max("position"))
        self.position: int = last["m"] or 0
        # Where the run's writer stands at the window's start: a live writer knows it from its previous batch
        # and never reads it back from the table, so it is read here, untimed (see `host_write`).
        self.cursor = journal.cursor_of(self.run)
        self.window_events = self._window_events()
        self.messages = _shared_messages(synthetic)
        self.end_seconds: list[float] = []

    def _window_events(self) -> list[tuple[Any, ...]]:
        """The window's timeline rows as the baseline inserts them (projected and JSON-encoded beforehand)."""
        import json

        from runs.models import TimelineOrigin
        from runs.services.timeline import dump_event

        observer = copy.copy(self.observer)
        rows: list[tuple[Any, ...]] = []
        for item in self.synthetic.items[self.start :]:
            for event in observer.observe(item):
                dumped = dump_event(event)
                rows.append(
                    (
                        self.run.execution_id,
                        self.position + len(rows) + 1,
                        self.run.pk,
                        dumped.get("subagentRunId", ""),
                        dumped["type"],
                        json.dumps(dumped),
                        item.occurred_at,
                        TimelineOrigin.RUN.value,
                    )
                )
        return rows

    def _exporter(self) -> Any:
        """`export(boundary)` for the writer: the engine's export work, with an encoder warmed up to the window."""
        from runs.harness import HistoryEncoder

        encoder = HistoryEncoder()
        before = [b for b in self.synthetic.boundaries if b.position < self.start]
        if before:
            encoder.encode(self.messages[before[-1].position])

        def export(boundary: Any) -> Any:
            state = boundary.state
            return state.with_encoded_history(
                encoder.encode(self.messages[boundary.position]),
                agent_context_state=state.agent_context_state,
                environment_states_json=b"{}",
            )

        return export

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
        from runs.services.timeline import RunProjection

        self.reset()
        # The observer's state is immutable and replaced on every item, so a shallow copy of the seeded
        # observer continues from the window's start without disturbing the next repetition's copy.
        projection = RunProjection(self.run, copy.copy(self.observer))
        # The window continues a run whose earlier batches this writer wrote: it holds their journal cursor and
        # last timeline position (reading the cursor back at depth is a scan of the run that no live run does).
        projection._cursor, projection._last_position = self.cursor, self.position
        export = self._exporter()
        with stopwatch() as elapsed:
            end = as_worker(
                lambda: write_like_worker(
                    self.run, self.lease, projection, self.synthetic, start=self.start, export=export
                )
            )
        self.end_seconds.append(end)
        return elapsed() - end

    def bulk_insert(self) -> float:
        from django.db import connection

        from runs.models import JournalEntry

        self.reset()
        table = JournalEntry._meta.db_table
        columns = ", ".join(f'"{column}"' for column in _COLUMNS)
        rows: list[tuple[Any, ...]] = [
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
        events = self.window_events
        timeline_columns = ", ".join(f'"{column}"' for column in _TIMELINE_COLUMNS)
        settings = connection.settings_dict
        if connection.vendor == "sqlite":
            rows = [(*row[:5], row[5].isoformat(), *row[6:]) for row in rows]
            events = [(*row[:6], row[6].isoformat(), *row[7:]) for row in events]
            raw = sqlite3.connect(settings["NAME"], timeout=20)
            try:
                raw.execute("PRAGMA synchronous=NORMAL")
                marks = ", ".join("?" * len(_COLUMNS))
                event_marks = ", ".join("?" * len(_TIMELINE_COLUMNS))
                with stopwatch() as elapsed, raw:
                    raw.executemany(f"INSERT INTO {table} ({columns}) VALUES ({marks})", rows)
                    raw.executemany(
                        f"INSERT INTO runs_timelineevent ({timeline_columns}) VALUES ({event_marks})", events
                    )
            finally:
                raw.close()
            return elapsed()

        import psycopg

        connection_args = {"host": settings["HOST"], "port": settings["PORT"], "user": settings["USER"]}
        with psycopg.connect(**connection_args, dbname=settings["NAME"]) as pg, stopwatch() as elapsed:
            copy_sql = f"COPY {table} ({columns}) FROM STDIN"
            with pg.transaction(), pg.cursor() as cursor:
                with cursor.copy(copy_sql) as copy_in:
                    for row in rows:
                        copy_in.write_row(row)
                with cursor.copy(f"COPY runs_timelineevent ({timeline_columns}) FROM STDIN") as copy_in:
                    for row in events:
                        copy_in.write_row(row)
        return elapsed()


def _shared_messages(synthetic: SyntheticRun) -> dict[int, list[Any]]:
    """Each boundary's history as message objects shared with the previous boundary's, as a live stream has them."""
    shared: list[Any] = []
    by_position = {}
    for boundary in synthetic.boundaries:
        messages = list(boundary.state.message_history)
        for index, message in enumerate(messages):
            if index < len(shared) and shared[index] == message:
                messages[index] = shared[index]
        shared = messages
        by_position[boundary.position] = messages
    return by_position


def _stored_bytes(synthetic: SyntheticRun) -> dict[str, Any]:
    """The bytes of the whole run's checkpoints as the write path stores them, and of its journal (not timed)."""
    from django.db.models import Sum
    from django.db.models.functions import Length

    from runs.models import Checkpoint

    from .host import discard, leased_run, seed_checkpoints

    discard(synthetic.thread_id)
    run, _ = leased_run(synthetic.thread_id, synthetic.run_id)
    seed_checkpoints(run, synthetic)
    stored = Checkpoint.objects.filter(run=run).aggregate(
        state=Sum(Length("state_json")), delta=Sum(Length("history_delta"))
    )
    checkpoint_bytes = (stored["state"] or 0) + (stored["delta"] or 0)
    whole_states = sum(len(b.state.model_dump_json()) for b in synthetic.boundaries)
    journal_bytes = sum(len(entry.payload) for entry in synthetic.encoded)
    discard(synthetic.thread_id)
    return {
        "tool_rounds": sum(b.boundary == "tool_execution" for b in synthetic.boundaries),
        "checkpoints": len(synthetic.boundaries) + 1,
        "checkpoint_bytes": checkpoint_bytes,
        "journal_bytes": journal_bytes,
        "checkpoint_over_journal_bytes": checkpoint_bytes / journal_bytes,
        "whole_state_bytes_before": whole_states,
    }


def run(context: BenchContext) -> Report:

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
                baseline_name="driver bulk insert of the same encoded journal and timeline rows, one transaction",
                target=TARGET,
                extra={
                    "run_items": synthetic.size,
                    "window_start": depth.start,
                    "boundaries_in_window": sum(b.position >= depth.start for b in synthetic.boundaries),
                    "end_ms": statistics.median(depth.end_seconds) * 1000,
                    **_stored_bytes(synthetic),
                },
            )
        )
    report.notes.append(
        f"Each case writes the last {window} items of a run of the named size (earlier items seeded untimed), "
        "so the per-item cost is taken at that depth. Subject = the worker's write path replayed (adaptive "
        "BatchWriter batches, projection, timeline rows, export_state at boundaries, boundary checkpoints, commit, "
        "publish to Redis), without the run's end (reported as end_ms); baseline = the same journal and timeline "
        "rows by the raw driver, so the projection, encoding, checkpoints and publication are the host's extra work."
    )
    return report
