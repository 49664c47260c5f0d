"""Benchmark 6: many viewers of one live execution, through real daphne processes.

Three scenarios. A synthetic run is written through the worker's write path (`bench.writer`) at `RATE` items per
second while viewers (websocket clients in `PROCESSES` separate processes, `bench.viewer_clients`) subscribe
from the start: `ramp` opens 1000 viewers evenly over 10 s, so most join mid-run and replay before going live;
`burst` opens 300 at once; `ramp, 2 daphnes` is the ramp again with the viewers split between two daphne
processes, as `HARNESS_WEB=2` runs them behind a load balancer. Every viewer must be served and end with exactly
the stored timeline (the sha256 of its frames equals the stored frames'), and the p99 of creation-to-receipt over
every live frame of every viewer must stay under 100 ms. There is no baseline: the targets are absolute. Each
repetition also notes the load average at its start and the CPU time the daphnes and the client processes used,
to tell which of them was short of CPU.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from bisect import bisect_left
from typing import Any

from tests.support.services import DaphneServer

from .context import BenchContext
from .host import as_worker
from .live import _positions_by_item
from .measure import Comparison, Report, Stats, Target, percentile
from .sockets import daphne, operator_cookie
from .synthetic import SIZES, SyntheticRun, synthetic_run
from .writer import write_like_worker

__all__ = ("run",)

RATE = 20.0
PROCESSES = 2
# (label, viewers, seconds over which they open, daphne processes)
SCENARIOS = (("ramp", 1000, 10.0, 1), ("burst", 300, 0.0, 1), ("ramp, 2 daphnes", 1000, 10.0, 2))
QUICK_SCENARIOS = (("ramp", 60, 2.0, 1), ("burst", 30, 0.0, 1), ("ramp, 2 daphnes", 60, 2.0, 2))
LATENCY = Target("median", "<", 100.0, "p99 creation-to-receipt of live frames under 100 ms")
SERVED = Target("median", ">=", 1.0, "every viewer served with exactly the stored timeline")


def _stored_digest(execution_pk: int) -> str:
    from runs.protocol import event_frame_text
    from runs.services.timeline import read_side

    frames = [json.loads(event_frame_text(frame)) for frame in read_side.frames_after(execution_pk, 0, limit=10**7)]
    return hashlib.sha256(json.dumps(frames, sort_keys=True).encode()).hexdigest()


def _cpu_seconds(pid: int) -> float:
    """User and system CPU time of a running process, from /proc."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _servers_cpu(servers: list[DaphneServer]) -> float:
    return sum(_cpu_seconds(server.process.pid) for server in servers if server.process is not None)


def _once(
    servers: list[DaphneServer],
    cookie: str,
    synthetic: SyntheticRun,
    positions: list[int],
    viewers: int,
    ramp: float,
) -> dict[str, Any]:
    from runs.services.timeline import RunProjection

    from .host import discard, leased_run

    discard(synthetic.thread_id)
    run, lease = leased_run(synthetic.thread_id, synthetic.run_id)
    load = os.getloadavg()[0]
    server_cpu = _servers_cpu(servers)
    shares = [viewers // PROCESSES + (n < viewers % PROCESSES) for n in range(PROCESSES)]
    clients = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bench.viewer_clients",
                servers[n % len(servers)].ws_url,
                servers[n % len(servers)].base_url,
                cookie,
                str(run.execution_id),
                str(share),
                str(ramp),
                str(positions[-1]),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        for n, share in enumerate(shares)
    ]
    try:
        created_at = [0.0] * synthetic.size

        def created(position: int, at: float) -> None:
            created_at[position] = at

        projection = RunProjection(run)
        as_worker(lambda: write_like_worker(run, lease, projection, synthetic, pace=RATE, created=created))
        outputs = [json.loads(client.communicate(timeout=240)[0].strip().splitlines()[-1]) for client in clients]
        server_cpu = _servers_cpu(servers) - server_cpu
    finally:
        for client in clients:
            if client.poll() is None:
                client.kill()
    stored = _stored_digest(run.execution_id)
    results = [viewer for output in outputs for viewer in output["viewers"]]
    latencies = [
        (at - created_at[bisect_left(positions, position)]) * 1000
        for viewer in results
        for position, at in viewer["live"]
    ]
    discard(synthetic.thread_id)
    return {
        "served": sum(viewer["served"] and viewer["digest"] == stored for viewer in results) / viewers,
        "p99": percentile(latencies, 0.99) if latencies else float("inf"),
        "p50": percentile(latencies, 0.50) if latencies else float("inf"),
        "live_frames": len(latencies),
        "errors": [error for output in outputs for error in output["errors"]][:5],
        "load": load,
        # The writer keeps its pace only while it gets the CPU it needs: the run's actual length.
        "write_s": created_at[-1] - created_at[0],
        "daphne_cpu_s": server_cpu,
        "clients_cpu_s": sum(output["cpu_s"] for output in outputs),
    }


def run(context: BenchContext) -> Report:
    report = Report("viewers", context.database, context.quick, context.repeats)
    synthetic = synthetic_run(SIZES["0.3k"])
    positions = _positions_by_item(synthetic)
    cookie = operator_cookie()
    repeats = min(context.repeats, 3)
    for label, viewers, ramp, processes in QUICK_SCENARIOS if context.quick else SCENARIOS:
        servers = [daphne(index) for index in range(processes)]
        outcomes = [_once(servers, cookie, synthetic, positions, viewers, ramp) for _ in range(repeats)]
        extra = {
            "viewers": viewers,
            "ramp_s": ramp,
            "daphnes": processes,
            "items_per_s": RATE,
            "events_per_run": positions[-1],
            "p50_ms": [o["p50"] for o in outcomes],
            "live_frames": [o["live_frames"] for o in outcomes],
            "load_1min_at_start": [o["load"] for o in outcomes],
            "write_s": [o["write_s"] for o in outcomes],
            "daphne_cpu_s": [o["daphne_cpu_s"] for o in outcomes],
            "clients_cpu_s": [o["clients_cpu_s"] for o in outcomes],
            "errors": [e for o in outcomes for e in o["errors"]][:5],
        }
        size = f"{viewers} viewers" + (f" over {ramp:g} s" if ramp else " at once")
        for name, values, target, unit in (
            (f"{label}: live p99", [o["p99"] for o in outcomes], LATENCY, "ms"),
            (f"{label}: served with the stored timeline", [o["served"] for o in outcomes], SERVED, "fraction"),
        ):
            report.add(
                Comparison(
                    name=name,
                    size=size,
                    items=0,
                    subject=Stats.of(values),
                    baseline=None,
                    baseline_name="",
                    target=target,
                    unit=unit,
                    extra=extra,
                )
            )
    report.notes.append(
        f"One daphne (two in `ramp, 2 daphnes`, each client process on one of them); viewers in {PROCESSES} client "
        "processes, which note each message's receipt time and decode "
        f"it after the run; a {positions[-1]}-event run written at {RATE:.0f} items/s through the worker's write "
        "path while they subscribe. Each repetition is one run; the figure is "
        "the median over repetitions of that run's p99 (and of its fraction of viewers served with the stored "
        "timeline)."
    )
    return report
