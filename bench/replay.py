"""Benchmark 3: websocket replay of a long execution until `ready`, against reading and encoding its rows.

The subject is a real client (the `websockets` package) opening `/ws/executions/<pk>/` on a real daphne subprocess,
subscribing from the start and timing until the server's `ready` marker, every replayed frame received (as text:
like the baseline's client it does not decode event messages; `ready` must name the last position). The time
includes opening the socket, reported apart as `open_ms_median`. The baseline is the floor for the same work: it
reads the same timeline rows with the raw database driver in one ordered query, the events as their stored text
(not decoded), puts them into pages of `REPLAY_PAGE_SIZE` frames by string formatting, and sends the pages over a
plain websocket (the `websockets` package, server and client in the benchmark process) until the client has
received the last one.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import statistics
from typing import Any

from websockets.asyncio.client import connect
from websockets.asyncio.server import serve
from websockets.typing import Origin

from .context import BenchContext
from .measure import Comparison, Report, Target, measure_pair, stopwatch
from .sockets import daphne, operator_cookie, seed_timeline
from .synthetic import SIZES, synthetic_run

__all__ = ("run",)

# Both `event` and `events` messages start so (the server splices stored text, without spaces).
_EVENT_MESSAGE_START = '{"type":"event'
TARGET = Target("slowdown", "<=", 1.5, "time to `ready` within 1.5x of a raw read and send of the stored text")


async def _replay(
    ws_url: str, base_url: str, cookie: str, execution_pk: int, expected: int, opened: list[float]
) -> float:
    with stopwatch() as elapsed:
        async with connect(
            f"{ws_url}/ws/executions/{execution_pk}/",
            origin=Origin(base_url),
            additional_headers={"Cookie": cookie},
            max_size=None,
        ) as socket:
            opened.append(elapsed())
            await socket.send(json.dumps({"type": "subscribe", "after": None}))
            while True:
                text = await socket.recv(decode=True)
                # Event messages are received, not decoded: the baseline's client does not decode them either.
                if text.startswith(_EVENT_MESSAGE_START):
                    continue
                message = json.loads(text)
                if message["type"] == "ready":
                    break
                if message["type"] == "error":
                    raise RuntimeError(f"replay refused: {message}")
            ready = elapsed()
    # Positions are 1..n and `ready` names the last one sent, so this holds only once every event was sent.
    if message["position"] != expected:
        raise RuntimeError(f"replay was ready at position {message['position']}, expected {expected}")
    return ready


_ROWS_SQL = (
    "SELECT t.position, r.run_id, t.run_id, t.subagent_run_id, t.origin, {event} FROM runs_timelineevent t "
    "JOIN runs_run r ON r.id = t.run_id WHERE t.execution_id = {mark} ORDER BY t.position"
)


def _raw_rows(execution_pk: int) -> list[tuple[Any, ...]]:
    """The replay's rows through the raw driver, the event as its stored text."""
    from django.db import connection

    settings = connection.settings_dict
    if connection.vendor == "sqlite":
        raw = sqlite3.connect(settings["NAME"], timeout=20)
        try:
            return raw.execute(_ROWS_SQL.format(event="t.event", mark="?"), (execution_pk,)).fetchall()
        finally:
            raw.close()
    import psycopg

    connection_args = {"host": settings["HOST"], "port": settings["PORT"], "user": settings["USER"]}
    with psycopg.connect(**connection_args, dbname=settings["NAME"]) as pg:
        return pg.execute(_ROWS_SQL.format(event="t.event::text", mark="%s"), (execution_pk,)).fetchall()


def _pages(rows: list[tuple[Any, ...]], size: int) -> list[str]:
    frames = [
        f'{{"type":"event","position":{position},"run_id":"{run_id}","run":{run_pk},'
        f'"subagent_run_id":"{subagent}","origin":"{origin}","event":{event}}}'
        for position, run_id, run_pk, subagent, origin, event in rows
    ]
    return [
        '{"type":"events","events":[' + ",".join(frames[start : start + size]) + "]}"
        for start in range(0, len(frames), size)
    ]


async def _read_and_send_raw(execution_pk: int) -> float:
    from runs.services.timeline import REPLAY_PAGE_SIZE

    async def send_pages(socket: Any) -> None:
        await socket.recv()
        for page in _pages(await asyncio.to_thread(_raw_rows, execution_pk), REPLAY_PAGE_SIZE):
            await socket.send(page)
        await socket.send('{"type":"ready"}')

    async with serve(send_pages, "127.0.0.1", 0, max_size=None) as server:
        port = server.sockets[0].getsockname()[1]
        async with connect(f"ws://127.0.0.1:{port}/", max_size=None) as socket:
            with stopwatch() as elapsed:
                await socket.send("go")
                while await socket.recv() != '{"type":"ready"}':
                    pass
                return elapsed()


def run(context: BenchContext) -> Report:
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
        opened: list[float] = []

        def replayed(e: int = execution, n: int = count, o: list[float] = opened) -> float:
            return asyncio.run(_replay(server.ws_url, server.base_url, cookie, e, n, o))

        def sent_raw(e: int = execution) -> float:
            return asyncio.run(_read_and_send_raw(e))

        subject, baseline = measure_pair(replayed, sent_raw, context.repeats, warmup=1 if number == 0 else 0)
        report.add(
            Comparison(
                name="replay",
                size=size,
                items=count,
                subject=subject,
                baseline=baseline,
                baseline_name="raw driver read of the same rows (stored event text), sent in pages over a websocket",
                target=TARGET,
                # The socket's opening (HTTP upgrade, session and permission checks) is part of the subject's
                # time and of no baseline's; its median is reported so the per-event part can be told apart.
                extra={"source_items": synthetic.size, "open_ms_median": statistics.median(opened) * 1000},
            )
        )
        discard(synthetic.thread_id)
    report.notes.append(
        "items = timeline events (AG-UI events) of the execution; the client runs in the benchmark process, "
        "daphne in its own, both on the same 2 CPUs."
    )
    return report
