"""Benchmark: a run bundle's export and import of a long execution, against the raw driver moving the same rows.

The execution is a cached synthetic run of 1k, 10k or 100k items seeded as the other benchmarks seed theirs
(`bench.host`, `bench.sockets`): its journal, its timeline and its checkpoints (a chain of deltas and bases, as the
write path stores them), then marked completed. Export runs `bundle_export.export_bundle` into a file, in full and
redacted mode; its baseline reads the same rows (thread, execution, run, journal, checkpoints, timeline) with the
raw driver and writes each as a JSON line into a plain file, so the ratio is what the bundle machinery costs (the
ORM, masking, hashing, the zip's compression, the record of the export). Import runs `bundle_import.import_bundle`
of each mode's file into an empty database; its baseline inserts the rows the first read took, as they were, with
the raw driver in one transaction. The copy (or the original) is deleted before each repetition, untimed.

The bundle's bytes are reported against the bytes the execution takes in the database (journal payloads, timeline
events, checkpoint states and deltas), in their own cases (unit: bytes) beside the timings.
"""

from __future__ import annotations

import json
import sqlite3
import tempfile
import zipfile
from functools import partial
from pathlib import Path
from typing import Any

from .context import BenchContext
from .measure import Comparison, Report, Stats, measure_interleaved, stopwatch
from .synthetic import SIZES, SyntheticRun, synthetic_run

__all__ = ("run",)

# The tables of the tree, in an order the raw insert can follow, with the column naming the tree's row.
_TABLES = (
    ("runs_thread", "id", "thread"),
    ("runs_execution", "thread_id", "thread"),
    ("runs_run", "execution_id", "execution"),
    ("runs_journalentry", "run_id", "run"),
    ("runs_checkpoint", "thread_id", "thread"),
    ("runs_timelineevent", "execution_id", "execution"),
)
Rows = dict[str, tuple[list[str], list[tuple[Any, ...]]]]


def _ended(synthetic: SyntheticRun) -> Any:
    """The synthetic run seeded as one completed execution (journal, timeline, checkpoints); its Run row."""
    from django.utils import timezone

    from runs.models import Execution, ExecutionStatus, Run, RunStatus

    from .host import discard, leased_run, seed_checkpoints, seed_journal
    from .sockets import seed_timeline

    discard(synthetic.thread_id)
    run, _ = leased_run(synthetic.thread_id, synthetic.run_id)
    seed_journal(run, synthetic.encoded)
    seed_timeline(run, synthetic)
    seed_checkpoints(run, synthetic)
    now = timezone.now()
    Run.objects.filter(pk=run.pk).update(status=RunStatus.COMPLETED, lease_token=None, finished_at=now)
    Execution.objects.filter(pk=run.execution_id).update(status=ExecutionStatus.COMPLETED, finished_at=now)
    return Run.objects.select_related("execution__thread").get(pk=run.pk)


def _stored_bytes(run: Any) -> dict[str, int]:
    """What the execution takes in the database, by table: the columns that hold its content."""
    from django.db.models import Sum
    from django.db.models.functions import Length

    from runs.models import Checkpoint, JournalEntry, TimelineEvent

    journal = JournalEntry.objects.filter(run=run).aggregate(n=Sum(Length("payload")))["n"] or 0
    timeline = TimelineEvent.objects.filter(execution_id=run.execution_id).aggregate(n=Sum(Length("event")))["n"] or 0
    stored = Checkpoint.objects.filter(run=run).aggregate(
        state=Sum(Length("state_json")), delta=Sum(Length("history_delta"))
    )
    checkpoint = (stored["state"] or 0) + (stored["delta"] or 0)
    return {
        "journal": journal,
        "timeline": timeline,
        "checkpoints": checkpoint,
        "total": journal + timeline + checkpoint,
    }


def _connect() -> sqlite3.Connection:
    from django.db import connection

    if connection.vendor != "sqlite":
        raise RuntimeError("the bundles benchmark's baselines use the sqlite3 driver: run it on SQLite")
    raw = sqlite3.connect(connection.settings_dict["NAME"], timeout=20)
    raw.execute("PRAGMA synchronous=NORMAL")
    return raw


def _keys(run: Any) -> dict[str, int]:
    return {"thread": run.execution.thread_id, "execution": run.execution_id, "run": run.pk}


def _read_raw(run: Any) -> Rows:
    """The tree's rows as the driver returns them, with their columns' names."""
    keys, rows = _keys(run), {}
    raw = _connect()
    try:
        for table, column, key in _TABLES:
            cursor = raw.execute(f"SELECT * FROM {table} WHERE {column} = ?", (keys[key],))
            rows[table] = ([description[0] for description in cursor.description], cursor.fetchall())
    finally:
        raw.close()
    return rows


def _insert_raw(rows: Rows) -> float:
    raw = _connect()
    try:
        with stopwatch() as elapsed, raw:
            for table, _, _ in _TABLES:
                columns, taken = rows[table]
                marks = ", ".join("?" * len(columns))
                names = ", ".join(f'"{column}"' for column in columns)
                raw.executemany(f"INSERT INTO {table} ({names}) VALUES ({marks})", taken)
        return elapsed()
    finally:
        raw.close()


def _drop(thread_id: str) -> None:
    """Delete the tree (the original or an imported copy) and the records of the transfers that named it."""
    from django.db import transaction

    from runs.models import BundleTransfer

    from .host import discard

    # In one transaction: the transfers name the tree's rows, and the tree's threads name the transfers.
    with transaction.atomic():
        discard(thread_id)
        BundleTransfer.objects.all().delete()


class _Case:
    """One size: the seeded execution, its bundle files and the raw rows, and the timed operations on them."""

    def __init__(self, synthetic: SyntheticRun, scratch: Path) -> None:
        self.synthetic = synthetic
        self.scratch = scratch
        self.run = _ended(synthetic)
        self.stored = _stored_bytes(self.run)
        self.rows = _read_raw(self.run)
        self.bundle_bytes: dict[str, list[int]] = {"full": [], "redacted": []}

    def path(self, mode: str) -> Path:
        return self.scratch / f"bundle-{mode}.zip"

    def export(self, mode: str) -> float:
        from runs.models import BundleMode
        from runs.services.lifecycle import bundle_export

        with self.path(mode).open("wb") as target, stopwatch() as elapsed:
            bundle_export.export_bundle(self.run.execution, target, mode=BundleMode(mode))
        self.bundle_bytes[mode].append(self.path(mode).stat().st_size)
        return elapsed()

    def unpacked_bytes(self, mode: str) -> int:
        """The bytes of the bundle's members before compression, as its manifest lists them."""
        with zipfile.ZipFile(self.path(mode)) as bundle:
            members = json.loads(bundle.read("manifest.json"))["members"]
        return sum(member["bytes"] for member in members.values())

    def read_raw(self) -> float:
        with stopwatch() as elapsed, (self.scratch / "raw.jsonl").open("w") as out:
            for _, taken in _read_raw(self.run).values():
                for row in taken:
                    out.write(json.dumps(row) + "\n")
        return elapsed()

    def import_(self, mode: str) -> float:
        from runs.models import DEFAULT_TEAM, Team
        from runs.services.lifecycle import bundle_import

        _drop(self.synthetic.thread_id)
        team = Team.objects.get(name=DEFAULT_TEAM)
        with self.path(mode).open("rb") as source, stopwatch() as elapsed:
            bundle_import.import_bundle(source, team=team)
        return elapsed()

    def insert_raw(self) -> float:
        _drop(self.synthetic.thread_id)
        return _insert_raw(self.rows)


def _bytes(samples: list[int], repeats: int) -> Stats:
    # One figure per timed export (the warm-up's left out), so the samples match the timings'.
    return Stats.of([float(size) for size in samples[-repeats:]])


def run(context: BenchContext) -> Report:
    report = Report("bundles", context.database, context.quick, context.repeats)
    with tempfile.TemporaryDirectory(prefix="harness-bench-bundles-") as scratch:
        for number, size in enumerate(context.sizes):
            synthetic = synthetic_run(SIZES[size])
            case = _Case(synthetic, Path(scratch))
            warmup = 1 if number == 0 else 0
            full, redacted, read = measure_interleaved(
                (partial(case.export, "full"), partial(case.export, "redacted"), case.read_raw),
                context.repeats,
                warmup=warmup,
            )
            counts = {
                "timeline_rows": len(case.rows["runs_timelineevent"][1]),
                "checkpoints": len(case.rows["runs_checkpoint"][1]),
            }
            read_name = (
                "driver read of the same rows (thread, execution, run, journal, checkpoints, timeline), written "
                "as JSON lines to a file"
            )
            for mode, stats in (("full", full), ("redacted", redacted)):
                report.add(
                    Comparison(f"export {mode}", size, synthetic.size, stats, read, read_name, None, extra=counts)
                )
            imported_full, imported_redacted, inserted = measure_interleaved(
                (partial(case.import_, "full"), partial(case.import_, "redacted"), case.insert_raw),
                context.repeats,
                warmup=warmup,
            )
            insert_name = "driver insert of the same rows, as read, in one transaction"
            for mode, stats in (("full", imported_full), ("redacted", imported_redacted)):
                report.add(
                    Comparison(f"import {mode}", size, synthetic.size, stats, inserted, insert_name, None, extra=counts)
                )
            stored = Stats.of([float(case.stored["total"])])
            for mode in ("full", "redacted"):
                report.add(
                    Comparison(
                        f"bundle bytes {mode}",
                        size,
                        synthetic.size,
                        _bytes(case.bundle_bytes[mode], context.repeats),
                        stored,
                        "bytes the execution takes in the database (journal payloads, timeline events, checkpoint "
                        "states and deltas)",
                        None,
                        extra={
                            "unpacked_bytes": case.unpacked_bytes(mode),
                            **{f"stored_{table}_bytes": value for table, value in case.stored.items()},
                        },
                        unit="bytes",
                    )
                )
            _drop(synthetic.thread_id)
    report.notes.append(
        "items = journal rows (source items) of the execution; export and import time a whole bundle of each mode "
        "against the raw driver reading or inserting the same rows, so the ratio is the bundle machinery's cost. "
        "A redacted bundle holds no journal and no checkpoint states but masks every value it keeps; its baseline "
        "is the same as the full one's. Bundle bytes are the zip file's against the stored content's (the "
        "synthetic run's text repeats, so it compresses far better than most runs'; unpacked_bytes is before "
        "compression)."
    )
    return report
