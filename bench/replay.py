"""Benchmark 3: websocket replay of a long execution until `ready`, against reading and encoding its rows.

The subject is a real client (the `websockets` package) opening `/ws/executions/<pk>/` on a real daphne
subprocess, subscribing from the start and timing until the server's `ready` marker, every replayed frame
received. The baseline, in the benchmark process, reads the same timeline rows from the database in one
ordered query and JSON-encodes them as the socket's replay messages (pages of `REPLAY_PAGE_SIZE` frames).
"""

from __future__ import annotations

import asyncio
import json

from websockets.asyncio.client import connect

from .context import Context
from .measure import Comparison, Report, Target, measure_pair, stopwatch
from .sockets import daphne, operator_cookie, seed_timeline
from .synthetic import SIZES, synthetic_run

__all__ = ("run",)

TARGET = Target("slowdown", "<=", 2.0, "time to `ready` within 2x of reading and encoding the same rows")


async def _replay(ws_url: str, base_url: str, cookie: str, execution_pk: int, expected: int) -> float:
    with stopwatch() as elapsed:
        async with connect(
            f"{ws_url}/ws/executions/{execution_pk}/",
            origin=base_url,
            additional_headers={"Cookie": cookie},
            max_size=None,
        ) as socket:
            await socket.send(json.dumps({"type": "subscribe", "after": None}))
            events = 0
            while True:
                message = json.loads(await socket.recv())
                if message["type"] == "event":
                    events += 1
                elif message["type"] == "events":
                    events += len(message["events"])
                elif message["type"] == "ready":
                    break
                elif message["type"] == "error":
                    raise RuntimeError(f"replay refused: {message}")
            ready = elapsed()
    if events != expected:
        raise RuntimeError(f"replay sent {events} events before ready, expected {expected}")
    return ready


def _read_and_encode(execution_pk: int) -> float:
    from runs.models import TimelineEvent
    from runs.services.timeline import REPLAY_PAGE_SIZE

    with stopwatch() as elapsed:
        rows = (
            TimelineEvent.objects.filter(execution_id=execution_pk)
            .order_by("position")
            .values_list("position", "run__run_id", "run_id", "subagent_run_id", "event")
        )
        page: list[dict] = []
        for position, run_id, run_pk, subagent_run_id, event in rows.iterator(chunk_size=2000):
            page.append(
                {
                    "type": "event",
                    "position": position,
                    "run_id": run_id,
                    "run": run_pk,
                    "subagent_run_id": subagent_run_id,
                    "event": event,
                }
            )
            if len(page) == REPLAY_PAGE_SIZE:
                json.dumps({"type": "events", "events": page})
                page = []
        json.dumps({"type": "events", "events": page})
    return elapsed()


def run(context: Context) -> Report:
    from .host import discard, leased_run

    report = Report("replay", context.database, context.quick, context.repeats)
    cookie = operator_cookie()
    server = daphne()
    for number, size in enumerate(context.sizes):
        synthetic = synthetic_run(SIZES[size])
        discard(synthetic.thread_id)
        run_row, _ = leased_run(synthetic.thread_id, synthetic.run_id)
        count = seed_timeline(run_row, synthetic)
        execution = run_row.execution_id
        subject, baseline = measure_pair(
            lambda e=execution, n=count: asyncio.run(_replay(server.ws_url, server.base_url, cookie, e, n)),
            lambda e=execution: _read_and_encode(e),
            context.repeats,
            warmup=1 if number == 0 else 0,
        )
        report.add(
            Comparison(
                name="replay",
                size=size,
                items=count,
                subject=subject,
                baseline=baseline,
                baseline_name="one ordered query of the same timeline rows, JSON-encoded in replay pages",
                target=TARGET,
                extra={"source_items": synthetic.size},
            )
        )
        discard(synthetic.thread_id)
    report.notes.append(
        "items = timeline events (AG-UI events) of the execution; the client runs in the benchmark process, "
        "daphne in its own, both on the same 2 CPUs."
    )
    return report
