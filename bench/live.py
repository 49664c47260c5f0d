"""Benchmark 4: live latency from an item's creation in the worker to its receipt by websocket clients.

Ten clients (another process) watch an execution through a real daphne while the benchmark process writes a
synthetic run through the worker's write path (`bench.writer`) paced at `RATE` items per second (about as
many AG-UI events: nearly every item is one event). An item's creation time is when it is handed to the
writer, as the engine yields it; each client notes when every frame arrived. Latency = receipt - creation of
the frame's source item, per frame and client, so it includes the batching delay; every repetition gives its
p50 and p99.
"""

from __future__ import annotations

import statistics
import time
from bisect import bisect_left

from tests.support.services import DaphneServer

from .context import BenchContext
from .host import as_worker
from .measure import Comparison, Report, Stats, Target, percentile
from .sockets import daphne, live_clients, operator_cookie, timeline_events
from .synthetic import SIZES, SyntheticRun, synthetic_run
from .writer import write_like_worker

__all__ = ("run",)

RATE = 500.0
CLIENTS = 10
TARGET = Target("median", "<", 50.0, "p99 creation-to-receipt under 50 ms")


def _positions_by_item(synthetic: SyntheticRun) -> list[int]:
    """The last timeline position produced by each source item (the projection is deterministic)."""
    from observers.agui import HarnessAguiStreamObserver

    observer = HarnessAguiStreamObserver(retain_events=False)
    last, positions = 0, []
    for item in synthetic.items:
        last += len(observer.observe(item))
        positions.append(last)
    return positions


def _once(
    server: DaphneServer, cookie: str, synthetic: SyntheticRun, positions: list[int]
) -> tuple[list[float], list[float], float]:
    from runs.services.timeline import RunProjection

    from .host import discard, leased_run

    discard(synthetic.thread_id)
    run, lease = leased_run(synthetic.thread_id, synthetic.run_id)
    with live_clients(server, cookie, run.execution_id, CLIENTS, positions[-1]) as receipts:
        created_at = [0.0] * synthetic.size
        committed_at = [0.0] * synthetic.size

        def created(position: int, at: float) -> None:
            created_at[position] = at

        def committed(first: int, last: int, at: float) -> None:
            committed_at[first : last + 1] = [at] * (last + 1 - first)

        projection = RunProjection(run)
        began = time.monotonic()
        as_worker(
            lambda: write_like_worker(
                run, lease, projection, synthetic, pace=RATE, created=created, committed=committed
            )
        )
        achieved = synthetic.size / (time.monotonic() - began)
    latencies, after_commit = [], []
    for client in receipts:
        for position, at in client:
            # `positions` holds each item's last timeline position, so this finds the item that produced it.
            item = bisect_left(positions, position)
            latencies.append((at - created_at[item]) * 1000)
            after_commit.append((at - committed_at[item]) * 1000)
    discard(synthetic.thread_id)
    return latencies, after_commit, achieved


def run(context: BenchContext) -> Report:
    report = Report("live", context.database, context.quick, context.repeats)
    size = "0.3k" if context.quick else "1k"
    synthetic = synthetic_run(SIZES[size])
    positions = _positions_by_item(synthetic)
    assert positions[-1] == len(timeline_events(synthetic))
    cookie = operator_cookie()
    p50s, p99s, maxima, pooled, rates, commit_p99s = [], [], [], [], [], []
    server = daphne()
    if not context.quick:
        _once(server, cookie, synthetic, positions)  # warm-up
    for _ in range(context.repeats):
        latencies, after_commit, achieved = _once(server, cookie, synthetic, positions)
        rates.append(achieved)
        commit_p99s.append(percentile(after_commit, 0.99))
        pooled.extend(latencies)
        p50s.append(percentile(latencies, 0.50))
        p99s.append(percentile(latencies, 0.99))
        maxima.append(max(latencies))
    extra = {
        "clients": CLIENTS,
        "items_per_s": RATE,
        "achieved_items_per_s_median": statistics.median(rates),
        "events_per_run": positions[-1],
        "receipts_per_run": len(pooled) // context.repeats,
        "pooled_p50_ms": percentile(pooled, 0.50),
        "pooled_p99_ms": percentile(pooled, 0.99),
        "pooled_max_ms": max(pooled),
        "mean_ms": statistics.fmean(pooled),
        # The part of the latency after the batch committed (publication, daphne, the clients).
        "commit_to_receipt_p99_ms_median": statistics.median(commit_p99s),
    }
    for name, values, target in (("p50", p50s, None), ("p99", p99s, TARGET), ("max", maxima, None)):
        report.add(
            Comparison(
                name=f"creation-to-receipt {name}",
                size=size,
                items=0,
                subject=Stats.of(values),
                baseline=None,
                baseline_name="",
                target=target,
                unit="ms",
                extra=extra,
            )
        )
    report.notes.append(
        f"{CLIENTS} websocket clients (one separate process) on a real daphne; the run's {positions[-1]} events "
        f"written at {RATE:.0f} items/s through the worker's write path (adaptive BatchWriter batches, boundary "
        "checkpoints); creation time = when the item is handed to the writer. Each repetition "
        "is one run; the figure is the median over repetitions of that run's percentile. When the writer cannot "
        "keep the pace (see achieved_items_per_s_median in the JSON) it writes as fast as it can."
    )
    return report
