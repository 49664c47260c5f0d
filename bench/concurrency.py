"""Benchmark: many executions on ONE worker process, against one alone; live latency and memory meanwhile.

Every execution runs `tests.support.paced_model`: three model calls, each waiting `WAIT_SECONDS` and then
streaming 50 deltas. `N` executions are created with their jobs held back, then their jobs are sent at once to one
worker (`manage.py rqworker`, the Host's concurrent worker); the makespan is from the first job sent to the last
execution's end, against the makespan of one execution alone. Meanwhile a websocket viewer (its own process, on a
real daphne) watches the first execution: live latency is a frame's receipt time minus its event's `occurred_at`,
the moment the engine produced it in the worker. The worker's RSS (from /proc) is sampled too: its growth at the
peak over its idle size, per execution in flight, is the memory figure.
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path

from .context import BenchContext
from .measure import Comparison, Report, Stats, Target, percentile
from .sockets import daphne, live_clients, operator_cookie

__all__ = ("run",)

COUNT = 100
QUICK_COUNT = 10
MAKESPAN_TARGET = Target("slowdown_vs_one", "<=", 2.0, f"{COUNT} at once on one worker within 2x of one alone")
MEMORY_TARGET = Target("rss_mb_per_run", "<=", 2.0, "worker RSS growth per execution in flight at most 2 MB")
LIVE_TARGET = Target("median", "<", 250.0, "live p99 creation-to-receipt of a watched execution under 250 ms")
PACED = {
    "HARNESS_TOOLSETS": "tests.support.paced_model.toolset",
    "HARNESS_DEMO_MODEL": "tests.support.paced_model.model",
}


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _latencies_ms(execution_pk: int, receipts: list[tuple[int, float]]) -> list[float]:
    from runs.models import TimelineEvent

    produced = dict(
        TimelineEvent.objects.filter(execution_id=execution_pk).values_list("position", "occurred_at").iterator()
    )
    return [(at - produced[position].timestamp()) * 1000 for position, at in receipts]


@dataclass
class _Makespan:
    seconds: float
    # The first execution's timeline length, and what its viewer measured (when one watched it).
    timeline_length: int
    latencies_ms: list[float]


def _makespan(count: int, env: dict[str, str], rss: list[float], watch_until: int | None = None) -> _Makespan:
    """Send `count` executions' jobs at once to a fresh worker and time them until every one ended; with
    `watch_until` (the last timeline position of one execution) a viewer watches the first one live."""
    from django.conf import settings

    from runs.models import ACTIVE_EXECUTION_STATUSES, AgentProfile, Execution, TimelineEvent
    from runs.services.lifecycle import executions
    from runs.services.store import queueing
    from tests.support import paced_model
    from tests.support.services import RQWorker, running

    settings.HARNESS_TOOLSETS = [PACED["HARNESS_TOOLSETS"]]
    settings.HARNESS_DEMO_MODEL = PACED["HARNESS_DEMO_MODEL"]
    profile = AgentProfile.objects.create(
        name=f"paced {time.monotonic_ns()}", model="demo", instructions="Be brief.", enabled_tools=paced_model.TOOLS
    )
    # Jobs an earlier benchmark left in the shared queue (the executions list's bulk approve queues 1,000 resume
    # runs) would be taken first and timed as ours.
    queueing.host_queue().empty()  # type: ignore[no-untyped-call]  # rq leaves it unannotated
    with running(RQWorker(env)) as worker:
        time.sleep(3)
        assert worker.process is not None
        rss.append(_rss_mb(worker.process.pid))
        # Created first, sent together: the makespan is the worker's, not the time it takes to create 100 rows.
        with queueing.held_back():
            started_executions = [
                executions.start_execution(executions.create_thread(profile, title=f"bench {n}"), "go")
                for n in range(count)
            ]
        pks = [execution.pk for execution in started_executions]
        watching: AbstractContextManager[list[list[tuple[int, float]]]] = (
            live_clients(daphne(), operator_cookie(), pks[0], 1, watch_until)
            if watch_until is not None
            else nullcontext([[]])
        )
        with watching as receipts:
            started = time.perf_counter()
            for execution in started_executions:
                queueing.send_job(execution.runs.get().pk)
            while Execution.objects.filter(pk__in=pks, status__in=ACTIVE_EXECUTION_STATUSES).exists():
                rss.append(_rss_mb(worker.process.pid))
                time.sleep(0.1)
            elapsed = time.perf_counter() - started
    statuses = set(Execution.objects.filter(pk__in=pks).values_list("status", flat=True))
    assert statuses == {"completed"}, statuses
    length = TimelineEvent.objects.filter(execution_id=pks[0]).count()
    return _Makespan(elapsed, length, _latencies_ms(pks[0], receipts[0]))


def run(context: BenchContext) -> Report:
    from django.conf import settings

    from tests.support.services import service_env

    count = QUICK_COUNT if context.quick else COUNT
    env = service_env(redis_url=context.redis_url, database_name=settings.DATABASES["default"]["NAME"]) | PACED
    # A slot for each: "100 at once on one worker" (#29). With the default 50 the worker runs them in two waves,
    # so the makespan could not come under 2x of one alone however cheap each run were.
    env["HARNESS_RUNS_PER_WORKER"] = str(count)
    report = Report("concurrency", context.database, context.quick, context.repeats)
    one_rss: list[float] = []
    alone = _makespan(1, env, one_rss)
    many_rss: list[float] = []
    together = _makespan(count, env, many_rss, watch_until=alone.timeline_length)
    one, many = alone.seconds, together.seconds
    idle, peak = many_rss[0], max(many_rss)
    latencies = together.latencies_ms
    report.add(
        Comparison(
            name="makespan",
            size=str(count),
            items=count,
            subject=Stats.of([many]),
            baseline=Stats.of([one]),
            baseline_name="one execution alone",
            target=MAKESPAN_TARGET,
            extra={"slowdown_vs_one": many / one, "one_s": one, "many_s": many},
        )
    )
    report.add(
        Comparison(
            name="memory",
            size=str(count),
            items=count,
            subject=Stats.of([peak - idle]),
            baseline=None,
            baseline_name="",
            target=MEMORY_TARGET,
            extra={"rss_mb_per_run": (peak - idle) / count, "idle_mb": idle, "peak_mb": peak},
            unit="MB",
        )
    )
    report.add(
        Comparison(
            name="live p99 during the makespan",
            size=str(count),
            items=0,
            subject=Stats.of([percentile(latencies, 0.99)]),
            baseline=None,
            baseline_name="",
            target=LIVE_TARGET,
            extra={
                "frames": len(latencies),
                "p50_ms": percentile(latencies, 0.50),
                "max_ms": max(latencies),
                "timeline_length": together.timeline_length,
            },
            unit="ms",
        )
    )
    report.notes.append(
        f"{count} executions of 3 paced model calls (1 s wait, 50 deltas each), created first and their jobs sent "
        f"at once to one worker process with {count} slots (HARNESS_RUNS_PER_WORKER), makespan against one alone; "
        "worker RSS sampled every 0.1 s (peak minus idle, per execution); one websocket viewer (its own process, real "
        "daphne) on the first execution: receipt minus the event's occurred_at, live frames only."
    )
    return report
