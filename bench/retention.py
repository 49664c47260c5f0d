"""Benchmark: the retention pass over 1,000,000 expired timeline events, and live runs writing meanwhile.

Seeded (not timed): one execution written through the worker's write path (`bench.writer`: a synthetic run's
journal, timeline and boundary checkpoints, its result and terminal checkpoint), then copied inside the database
(`INSERT ... SELECT`, the keys shifted) into finished executions of a team whose policy keeps 30 days, until
their timelines hold `EVENTS` events; every execution finished 60 days ago, so all of it is due. Journal entries
and checkpoints are what a real run of that length writes beside its events.

Measured, `PASSES` times: a sweeper pass (`retention.run_pass(max_chunks=HARNESS_RETENTION_CHUNKS_PER_PASS)`, the
sweeper's call) in a process of its own (`bench.retention_sweeper`), while `LIVE_RUNS` runs stream text deltas
through the worker's `BatchWriter` (its batches and group commit) in this process; and before it, a window of the
same live runs with no pass (the baseline, same data size). A live write's latency runs from the item's hand-off
to the writer to the commit of its batch (when a viewer can read it). Each pass reports its rows deleted per
second, its longest transaction, and the runs' p99 during it; the dry run's byte estimate (the Host's own
figure) before and after gives the bytes the passes freed.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import sys
import time
import uuid
from collections import deque
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from asgiref.sync import async_to_sync

from .context import BenchContext
from .measure import Comparison, Report, Stats, Target, percentile, stopwatch
from .synthetic import SIZES, SyntheticRun, synthetic_run

__all__ = ("run",)

EVENTS = 1_000_000
QUICK_EVENTS = 3_000
PASSES = 3
# A quick pass deletes a few chunks only, so each of its passes still has rows to delete.
QUICK_CHUNKS = 8
LIVE_RUNS = 5
PACE = 0.02
BASELINE_SECONDS = 10.0
QUICK_BASELINE_SECONDS = 1.0
RETENTION_DAYS = 30
FINISHED_AGO = timedelta(days=60)
CLONES_PER_TRANSACTION = 50
TEAM = "bench-retention"
TARGET = Target("slowdown", "<=", 2.0, "concurrent runs' write p99 during the pass within 2x of without")


@dataclass(frozen=True)
class _Seeded:
    executions: int
    timeline_events: int
    journal_entries: int
    checkpoints: int


def _team_and_version() -> tuple[Any, Any, Any]:
    from runs.models import AgentProfile, HostPolicy, Team
    from runs.services.store import publish_policy_version

    team, _ = Team.objects.get_or_create(name=TEAM)
    profile, _ = AgentProfile.objects.get_or_create(name=TEAM, defaults={"model": "demo", "team": team})
    policy, _ = HostPolicy.objects.get_or_create(name=TEAM, defaults={"team": team})
    # A long lease, as bench/host.py's: the template's write must not lose it.
    version = publish_policy_version(policy, created_by=None, retention_days=RETENTION_DAYS, lease_seconds=3600)
    return team, profile, version


def _template(synthetic: SyntheticRun, profile: Any, version: Any) -> Any:
    """One finished execution written as the worker writes a run; returns its run."""
    from runs.models import Execution, Run, Thread
    from runs.services.store import leases
    from runs.services.timeline import RunProjection

    from .writer import write_like_worker

    thread = Thread.objects.create(thread_id=synthetic.thread_id, profile=profile)
    execution = Execution.objects.create(
        thread=thread, number=1, input="bench", shown_input="bench", policy_version=version
    )
    run = Run.objects.create(execution=execution, number=1, run_id=synthetic.run_id, policy_version=version)
    lease = leases.acquire(run.pk)
    assert lease is not None
    run.refresh_from_db()
    async_to_sync(write_like_worker)(run, lease, RunProjection(run), synthetic)
    run.refresh_from_db()
    # Free the synthetic run's ids for the benchmarks after this one (the run row itself stays, as retention keeps it).
    Run.objects.filter(pk=run.pk).update(run_id=f"bench-retention-{uuid.uuid4().hex}")
    return run


def _copy(cursor: Any, model: Any, owner: str, template_owner: int, given: dict[str, tuple[str, int]]) -> None:
    """Copy the rows of `model` whose `owner` column is `template_owner` inside the database (`INSERT ... SELECT`):
    each column in `given` takes its SQL expression (with one `%s`) and parameter, the others are copied."""
    from django.db import connection

    quote = connection.ops.quote_name
    table = quote(model._meta.db_table)
    columns = [field.column for field in model._meta.local_concrete_fields]
    values = [given[column][0] if column in given else quote(column) for column in columns]
    params = [given[column][1] for column in columns if column in given]
    cursor.execute(
        f"INSERT INTO {table} ({', '.join(map(quote, columns))}) SELECT {', '.join(values)} FROM {table} "
        f"WHERE {quote(owner)} = %s",
        [*params, template_owner],
    )


def _seed(synthetic: SyntheticRun, events: int) -> _Seeded:
    from django.core.management.color import no_style
    from django.db import connection, transaction
    from django.db.models import Max, Min
    from django.utils import timezone

    from runs.models import Checkpoint, Execution, ExecutionStatus, JournalEntry, Run, RunStatus, Thread, TimelineEvent

    team, profile, version = _team_and_version()
    template = _template(synthetic, profile, version)
    execution, thread = template.execution, template.execution.thread
    thread.refresh_from_db()
    finished = timezone.now() - FINISHED_AGO
    Execution.objects.filter(pk=execution.pk).update(finished_at=finished)
    tables = {
        "journal": JournalEntry.objects.filter(run=template),
        "timeline": TimelineEvent.objects.filter(execution=execution),
        "checkpoints": Checkpoint.objects.filter(thread=thread),
    }
    ranges = {name: rows.aggregate(low=Min("pk"), high=Max("pk")) for name, rows in tables.items()}
    counts = {name: rows.count() for name, rows in tables.items()}
    everything = {name: rows.model._default_manager.all() for name, rows in tables.items()}
    bases = {name: (rows.aggregate(top=Max("pk"))["top"] or 0) + 1 for name, rows in everything.items()}
    clones = max(0, -(-events // counts["timeline"]) - 1)

    def shift(name: str, k: int) -> int:
        """What clone k adds to the template's keys of table `name`: its block after everything there was."""
        low, high = ranges[name]["low"], ranges[name]["high"]
        return int(bases[name] + k * (high - low + 1) - low)

    for first in range(0, clones, CLONES_PER_TRANSACTION):
        block = range(first, min(clones, first + CLONES_PER_TRANSACTION))
        # Keys are checked at commit on both databases, so a thread may name its checkpoint before it is copied.
        with transaction.atomic(), connection.cursor() as cursor:
            threads = Thread.objects.bulk_create(
                Thread(
                    thread_id=f"bench-retention-{k}",
                    profile=profile,
                    team=team,
                    selected_checkpoint_id=thread.selected_checkpoint_id + shift("checkpoints", k),
                )
                for k in block
            )
            executions = Execution.objects.bulk_create(
                Execution(
                    thread=clone,
                    number=1,
                    input="bench",
                    shown_input="bench",
                    status=ExecutionStatus.COMPLETED,
                    policy_version=version,
                    finished_at=finished,
                )
                for clone in threads
            )
            runs = Run.objects.bulk_create(
                Run(
                    execution=clone,
                    number=1,
                    run_id=f"bench-retention-{uuid.uuid4().hex}",
                    status=RunStatus.COMPLETED,
                    policy_version=version,
                    started_at=template.started_at,
                    finished_at=finished,
                    output=template.output,
                    usage=template.usage,
                )
                for clone in executions
            )
            for k, clone_thread, clone_execution, clone_run in zip(block, threads, executions, runs, strict=True):
                journal, timeline, checkpoints = shift("journal", k), shift("timeline", k), shift("checkpoints", k)
                _copy(
                    cursor,
                    JournalEntry,
                    "run_id",
                    template.pk,
                    {"id": ("id + %s", journal), "run_id": ("%s", clone_run.pk)},
                )
                _copy(
                    cursor,
                    TimelineEvent,
                    "execution_id",
                    execution.pk,
                    {
                        "id": ("id + %s", timeline),
                        "execution_id": ("%s", clone_execution.pk),
                        "run_id": ("%s", clone_run.pk),
                        "journal_entry_id": ("journal_entry_id + %s", journal),
                    },
                )
                _copy(
                    cursor,
                    Checkpoint,
                    "thread_id",
                    thread.pk,
                    {
                        "id": ("id + %s", checkpoints),
                        "thread_id": ("%s", clone_thread.pk),
                        "run_id": ("%s", clone_run.pk),
                        "parent_id": ("parent_id + %s", checkpoints),
                        "base_id": ("base_id + %s", checkpoints),
                    },
                )
    with connection.cursor() as cursor:
        # PostgreSQL's sequences do not see keys given explicitly (SQLite's AUTOINCREMENT does).
        for statement in connection.ops.sequence_reset_sql(no_style(), [JournalEntry, TimelineEvent, Checkpoint]):
            cursor.execute(statement)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    return _Seeded(
        executions=clones + 1,
        timeline_events=counts["timeline"] * (clones + 1),
        journal_entries=counts["journal"] * (clones + 1),
        checkpoints=counts["checkpoints"] * (clones + 1),
    )


class _Committed:
    """Stands in for a live run's RunProjection: records through it and notes each item's hand-off-to-commit time."""

    def __init__(self, projection: Any, latencies: list[float]) -> None:
        self.projection = projection
        self.created: deque[float] = deque()
        self.latencies = latencies
        self.loaded = False

    def load(self) -> None:
        self.projection.load()
        self.loaded = True

    def prepare(self, batch: Any, **options: Any) -> Any:
        return self.projection.prepare(batch, **options)

    def write(self, prepared: Any, *, lease: Any) -> Any:
        from django.db import transaction

        entries = self.projection.write(prepared, lease=lease)
        # Batches are written in stream order, so the front of the queue holds this batch's hand-off times.
        created = [self.created.popleft() for _ in range(prepared.size)]
        # Inside a group's transaction this runs at its commit; alone, the write has committed already.
        transaction.on_commit(lambda: self.latencies.extend(time.perf_counter() - at for at in created))
        return entries


async def _stream(run: Any, lease: Any, stop: asyncio.Event, latencies: list[float]) -> None:
    from pydantic_ai.messages import PartDeltaEvent, TextPartDelta

    from runs.harness import HarnessEvent
    from runs.services.timeline import RunProjection
    from runs.services.worker import BatchWriter
    from tests.support import factories

    thread_id, run_id = run.execution.thread.thread_id, run.run_id
    committed = _Committed(RunProjection(run), latencies)
    writer = BatchWriter(committed, lease)  # type: ignore[arg-type]  # the stand-in above records through the projection
    start = factories.text_items(thread_id, run_id)[:2]
    sequence = 0
    while not stop.is_set():
        item = (
            start[sequence]
            if sequence < len(start)
            else HarnessEvent(
                thread_id,
                run_id,
                sequence,
                factories.now(),
                PartDeltaEvent(index=0, delta=TextPartDelta(content_delta=f"{sequence} ")),
            )
        )
        committed.created.append(time.perf_counter())
        await writer.add(item)
        sequence += 1
        await asyncio.sleep(PACE)
    await writer.flush()
    await writer.close()


def _sweep(sweeper: subprocess.Popen[str]) -> dict[str, Any]:
    assert sweeper.stdin is not None and sweeper.stdout is not None
    sweeper.stdin.write("pass\n")
    sweeper.stdin.flush()
    line = sweeper.stdout.readline()
    if not line:
        raise RuntimeError("the sweeper process ended without answering")
    answer: dict[str, Any] = json.loads(line)
    return answer


def _window(sweeper: subprocess.Popen[str] | None, seconds: float) -> tuple[list[float], dict[str, Any] | None]:
    """The live runs' write latencies while one pass runs (`sweeper`) or for `seconds` (no pass), and the pass."""
    from runs.services.timeline import worker_sender

    from .host import discard, leased_run

    thread_ids = [f"bench-retention-live-{uuid.uuid4().hex}" for _ in range(LIVE_RUNS)]
    pairs = [leased_run(thread_id, f"run-{uuid.uuid4().hex}") for thread_id in thread_ids]
    latencies: list[float] = []
    outcome: list[dict[str, Any]] = []

    async def live() -> None:
        stop = asyncio.Event()
        async with worker_sender():
            writers = [asyncio.create_task(_stream(run, lease, stop, latencies)) for run, lease in pairs]
            if sweeper is None:
                await asyncio.sleep(seconds)
            else:
                outcome.append(await asyncio.get_running_loop().run_in_executor(None, _sweep, sweeper))
            stop.set()
            await asyncio.gather(*writers)

    async_to_sync(live)()
    for thread_id in thread_ids:
        discard(thread_id)
    return [latency * 1000 for latency in latencies], outcome[0] if outcome else None


def run(context: BenchContext) -> Report:
    from django.conf import settings

    from runs.services.recovery import estimate

    report = Report("retention", context.database, context.quick, PASSES)
    synthetic = synthetic_run(SIZES["0.3k" if context.quick else "1k"])
    with stopwatch() as seeding:
        seeded = _seed(synthetic, QUICK_EVENTS if context.quick else EVENTS)
    with stopwatch() as estimating:
        due = estimate()
    chunks = QUICK_CHUNKS if context.quick else settings.HARNESS_RETENTION_CHUNKS_PER_PASS
    baseline_seconds = QUICK_BASELINE_SECONDS if context.quick else BASELINE_SECONDS
    sweeper = subprocess.Popen(
        [sys.executable, "-m", "bench.retention_sweeper", str(chunks)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    passes: list[dict[str, Any]] = []
    during: list[list[float]] = []
    without: list[list[float]] = []
    try:
        assert sweeper.stdout is not None
        if sweeper.stdout.readline().strip() != "READY":
            raise RuntimeError("the sweeper process did not get ready")
        for _ in range(PASSES):
            without.append(_window(None, baseline_seconds)[0])
            latencies, outcome = _window(sweeper, 0)
            assert outcome is not None
            during.append(latencies)
            passes.append(outcome)
    finally:
        if sweeper.stdin is not None:
            sweeper.stdin.close()
        sweeper.wait(timeout=60)
    left = estimate()

    def rows(outcome: dict[str, Any]) -> int:
        return int(outcome["timeline_events"] + outcome["journal_entries"] + outcome["checkpoints"])

    rates = [rows(outcome) / outcome["wall_s"] for outcome in passes]
    events_per_s = statistics.median(outcome["timeline_events"] / outcome["wall_s"] for outcome in passes)
    due_rows = due.timeline_events + due.journal_entries + due.checkpoints
    size = f"{seeded.timeline_events:,} events"
    extra = {
        "seeded": vars(seeded),
        "seed_s": seeding(),
        "estimate_s": estimating(),
        "chunk_size": settings.HARNESS_RETENTION_CHUNK_SIZE,
        "chunks_per_pass": chunks,
        "passes": passes,
        "events_per_s_median": events_per_s,
        "due_before": vars(due),
        "due_after": vars(left),
        "bytes_freed_estimate": due.bytes - left.bytes,
        # At the measured rate, how long the sweeper needs for everything that was due: its passes back to back, and
        # one pass every HARNESS_RETENTION_INTERVAL_SECONDS as it runs them.
        "hours_for_all_due_rows": due_rows / statistics.median(rates) / 3600,
        "hours_at_sweeper_interval": due_rows
        / statistics.median(rows(outcome) for outcome in passes)
        * max(settings.HARNESS_RETENTION_INTERVAL_SECONDS, statistics.median(o["wall_s"] for o in passes))
        / 3600,
    }
    report.add(
        Comparison(
            name="rows deleted per second",
            size=size,
            items=0,
            subject=Stats.of(rates),
            baseline=None,
            baseline_name="",
            target=None,
            unit="rows/s",
            extra=extra,
        )
    )
    report.add(
        Comparison(
            name="longest transaction",
            size=size,
            items=0,
            subject=Stats.of([outcome["longest_transaction_ms"] for outcome in passes]),
            baseline=None,
            baseline_name="",
            target=None,
            unit="ms",
            extra={"transactions_per_pass": [outcome["transactions"] for outcome in passes]},
        )
    )
    writes = statistics.median(len(latencies) for latencies in during)
    report.add(
        Comparison(
            name="live write p99 during a pass",
            size=size,
            # The ratio is of the two p99s: both sides count as the same number of writes.
            items=int(writes),
            subject=Stats.of([percentile(latencies, 0.99) for latencies in during]),
            baseline=Stats.of([percentile(latencies, 0.99) for latencies in without]),
            baseline_name=f"the same live runs with no pass ({baseline_seconds:g} s)",
            target=TARGET,
            unit="ms",
            extra={
                "live_runs": LIVE_RUNS,
                "pace_s": PACE,
                "p50_ms_during": statistics.median(percentile(latencies, 0.5) for latencies in during),
                "p50_ms_without": statistics.median(percentile(latencies, 0.5) for latencies in without),
                "max_ms_during": max(max(latencies) for latencies in during),
                "writes_without": statistics.median(len(latencies) for latencies in without),
            },
        )
    )
    report.notes.append(
        f"{seeded.executions:,} finished executions past their team's retention: {seeded.timeline_events:,} timeline "
        f"events, {seeded.journal_entries:,} journal entries, {seeded.checkpoints:,} checkpoints (copies of one "
        f"{synthetic.size}-item run written through the worker's path). {PASSES} sweeper passes "
        f"(`run_pass(max_chunks={chunks})`, chunks of {settings.HARNESS_RETENTION_CHUNK_SIZE} rows) in a process "
        f"of their own, each with {LIVE_RUNS} live runs streaming a delta every {PACE * 1000:.0f} ms through the "
        "worker's BatchWriter; their baseline is the same runs with no pass, just before. Latency = an item's "
        "hand-off to its batch's commit. Rows/s counts events, journal entries and checkpoints (events alone: "
        f"{events_per_s:,.0f}/s); at that rate everything due takes {extra['hours_for_all_due_rows'] * 60:.0f} min of "
        f"passes back to back, {extra['hours_at_sweeper_interval']:.1f} h at one pass every "
        f"{settings.HARNESS_RETENTION_INTERVAL_SECONDS:g} s. Bytes freed (the dry run's estimate before and after): "
        f"{extra['bytes_freed_estimate']:,}. Each pass's longest transaction and how it began are in the JSON."
    )
    return report
