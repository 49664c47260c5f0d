"""Benchmark: many executions on ONE worker process, against one alone; the worker's memory per run in flight.

Every execution runs `tests.support.paced_model`: three model calls, each waiting `WAIT_SECONDS` and then
streaming 50 deltas. `N` executions are started at once with one worker (`manage.py rqworker`, the Host's
concurrent worker) taking them; the makespan is from the start to the last execution's end, against the
makespan of one execution alone. The worker's RSS (from /proc) is sampled meanwhile: its growth at the peak over
its idle size, per execution in flight, is the memory figure.
"""

from __future__ import annotations

import time
from pathlib import Path

from .context import BenchContext
from .measure import Comparison, Report, Stats, Target

__all__ = ("run",)

COUNT = 100
QUICK_COUNT = 10
MAKESPAN_TARGET = Target("slowdown_vs_one", "<=", 2.0, f"{COUNT} at once on one worker within 2x of one alone")
MEMORY_TARGET = Target("rss_mb_per_run", "<=", 2.0, "worker RSS growth per execution in flight at most 2 MB")
PACED = {
    "HARNESS_TOOLSETS": "tests.support.paced_model.toolset",
    "HARNESS_DEMO_MODEL": "tests.support.paced_model.model",
}


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _makespan(count: int, env: dict[str, str], rss: list[float]) -> float:
    """Start `count` executions at once on a fresh worker; seconds until every one ended."""
    from django.conf import settings

    from runs.models import ACTIVE_EXECUTION_STATUSES, AgentProfile, Execution
    from runs.services.lifecycle import executions
    from tests.support import paced_model
    from tests.support.services import RQWorker, running

    settings.HARNESS_TOOLSETS = [PACED["HARNESS_TOOLSETS"]]
    settings.HARNESS_DEMO_MODEL = PACED["HARNESS_DEMO_MODEL"]
    profile = AgentProfile.objects.create(
        name=f"paced {time.monotonic_ns()}", model="demo", instructions="Be brief.", enabled_tools=paced_model.TOOLS
    )
    with running(RQWorker(env)) as worker:
        time.sleep(3)
        assert worker.process is not None
        rss.append(_rss_mb(worker.process.pid))
        started = time.perf_counter()
        pks = [
            executions.start_execution(executions.create_thread(profile, title=f"bench {n}"), "go").pk
            for n in range(count)
        ]
        while Execution.objects.filter(pk__in=pks, status__in=ACTIVE_EXECUTION_STATUSES).exists():
            rss.append(_rss_mb(worker.process.pid))
            time.sleep(0.1)
        elapsed = time.perf_counter() - started
    statuses = set(Execution.objects.filter(pk__in=pks).values_list("status", flat=True))
    assert statuses == {"completed"}, statuses
    return elapsed


def run(context: BenchContext) -> Report:
    from django.conf import settings

    from tests.support.services import service_env

    count = QUICK_COUNT if context.quick else COUNT
    env = service_env(redis_url=context.redis_url, database_name=settings.DATABASES["default"]["NAME"]) | PACED
    report = Report("concurrency", context.database, context.quick, context.repeats)
    one_rss: list[float] = []
    one = _makespan(1, env, one_rss)
    many_rss: list[float] = []
    many = _makespan(count, env, many_rss)
    idle, peak = many_rss[0], max(many_rss)
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
    report.notes.append(
        f"{count} executions of 3 paced model calls (1 s wait, 50 deltas each) started at once on one worker "
        "process, makespan against one alone; worker RSS sampled every 0.1 s (peak minus idle, per execution)."
    )
    return report
