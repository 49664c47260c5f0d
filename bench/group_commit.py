"""Benchmark: group commit across runs, against a transaction per write, with many live runs on one event loop.

`RUNS` runs stream at once on one loop, as a worker carries them: each hands the worker's `BatchWriter` (its
20 ms batches) a text delta every `PACE` seconds, as a streaming model would, `ITEMS` in all, then flushes. The
subject commits the writes of all runs through one `CommitGroup`, as the worker does; the baseline gives each
write a transaction of its own (a group of at most one write: the worker before group commit). Same runs, same
items, same database, interleaved repetition by repetition.

Timed: the process's CPU time (the loop and the database thread) for the whole set. Reported beside it: wall
time, transactions, writes per transaction, and the p99 latency from a write's hand-off to its commit (what a
viewer waits for on top of the stream).
"""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid
from typing import Any

from .context import BenchContext
from .host import as_worker
from .measure import Comparison, Report, Stats, Target

__all__ = ("run",)

RUNS, ITEMS = 50, 200
QUICK_RUNS, QUICK_ITEMS = 10, 50
PACE = 0.01
TARGET = Target("slowdown", "<=", 1.0, "group commit costs no more CPU per item than a transaction per write")


def _timed_group(max_writes: int | None) -> Any:
    from runs.services.worker import CommitGroup
    from runs.services.worker.commit_group import MAX_WRITES

    class TimedGroup(CommitGroup):
        """Notes each write's latency from hand-off to commit."""

        def __init__(self) -> None:
            super().__init__(max_writes=max_writes or MAX_WRITES)
            self.latencies: list[float] = []

        async def write(self, work: Any) -> Any:
            handed = time.perf_counter()
            try:
                return await super().write(work)
            finally:
                self.latencies.append(time.perf_counter() - handed)

    return TimedGroup()


async def _stream(run: Any, lease: Any, items: list[Any], group: Any) -> None:
    from runs.services.timeline import RunProjection
    from runs.services.worker import BatchWriter

    writer = BatchWriter(RunProjection(run), lease, group=group)
    for item in items:
        await writer.add(item)
        await asyncio.sleep(PACE)
    await writer.flush()
    await writer.close()


def _once(runs: int, items: int, max_writes: int | None, outcome: list[dict[str, float]]) -> float:
    """One repetition on fresh runs; returns its CPU seconds and appends its other figures to `outcome`."""
    from runs.services.timeline import worker_sender
    from tests.support.stream_items import text_deltas

    from .host import discard, leased_run

    thread_ids = [f"bench-group-{uuid.uuid4().hex}" for _ in range(runs)]
    pairs = [leased_run(thread_id, f"run-{uuid.uuid4().hex}") for thread_id in thread_ids]
    streams = [text_deltas(run, items - 2) for run, _ in pairs]
    group = _timed_group(max_writes)

    async def all_runs() -> None:
        async with worker_sender():
            await asyncio.gather(
                *(_stream(run, lease, s, group) for (run, lease), s in zip(pairs, streams, strict=True))
            )

    cpu, wall = time.process_time(), time.perf_counter()
    as_worker(all_runs)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    latencies = sorted(group.latencies)
    outcome.append(
        {
            "wall_s": wall,
            "transactions": group.transactions,
            "writes_per_transaction": group.writes / group.transactions,
            "commit_p99_ms": latencies[int(0.99 * (len(latencies) - 1))] * 1000,
        }
    )
    for thread_id in thread_ids:
        discard(thread_id)
    return cpu


def run(context: BenchContext) -> Report:
    runs, items = (QUICK_RUNS, QUICK_ITEMS) if context.quick else (RUNS, ITEMS)
    report = Report("group_commit", context.database, context.quick, context.repeats)
    grouped: list[dict[str, float]] = []
    alone: list[dict[str, float]] = []
    subject: list[float] = []
    baseline: list[float] = []
    _once(runs, items, None, [])
    for _ in range(context.repeats):
        subject.append(_once(runs, items, None, grouped))
        baseline.append(_once(runs, items, 1, alone))

    def median(figures: list[dict[str, float]], key: str) -> float:
        return statistics.median(figure[key] for figure in figures)

    extra = {
        f"{key}_{side}": median(figures, key)
        for side, figures in (("grouped", grouped), ("alone", alone))
        for key in ("wall_s", "transactions", "writes_per_transaction", "commit_p99_ms")
    }
    report.add(
        Comparison(
            name="cpu",
            size=f"{runs} runs",
            items=runs * items,
            subject=Stats.of(subject),
            baseline=Stats.of(baseline),
            baseline_name="a transaction per write (a group of one)",
            target=TARGET,
            extra=extra,
        )
    )
    report.notes.append(
        f"{runs} runs streaming {items} items each (one every {PACE * 1000:.0f} ms) at once on one event loop through "
        "the worker's BatchWriter; timed is the process's CPU time. Medians: transactions "
        f"{extra['transactions_grouped']:.0f} grouped vs {extra['transactions_alone']:.0f} alone, writes per "
        f"transaction {extra['writes_per_transaction_grouped']:.1f} vs {extra['writes_per_transaction_alone']:.1f}, "
        f"commit p99 {extra['commit_p99_ms_grouped']:.0f} ms vs {extra['commit_p99_ms_alone']:.0f} ms, wall "
        f"{extra['wall_s_grouped']:.1f} s vs {extra['wall_s_alone']:.1f} s."
    )
    return report
