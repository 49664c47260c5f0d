"""Websocket clients for the live-latency benchmark, in their own process (no Django here).

`python -m bench.live_clients <ws url> <origin> <cookie> <execution pk> <clients> <last position>` opens the
clients, subscribes each from the start, prints `READY` once every client got its `ready` marker, then notes
the wall-clock receipt time of every live frame (none replayed before `ready`) until each client saw `last position`,
and prints
`{"receipts": [[[position, time], ...], ...]}` as its last line.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

from websockets.asyncio.client import connect
from websockets.typing import Origin

DEADLINE_SECONDS = 120


async def _client(
    url: str, origin: str, cookie: str, last: int, ready: asyncio.Event, receipts: list[tuple[int, float]]
) -> None:
    async with connect(url, origin=Origin(origin), additional_headers={"Cookie": cookie}, max_size=None) as socket:
        await socket.send(json.dumps({"type": "subscribe", "after": None}))
        while True:
            raw = await socket.recv()
            at = time.time()
            message = json.loads(raw)
            kind = message["type"]
            if kind == "ready":
                ready.set()
                if message["position"] >= last:
                    return
            elif kind in ("event", "events"):
                frames = message["events"] if kind == "events" else [message]
                # Frames before `ready` are the stored timeline replayed to a late subscriber, not live latency.
                if ready.is_set():
                    receipts.extend((frame["position"], at) for frame in frames)
                if frames[-1]["position"] >= last:
                    return
            elif kind == "error":
                raise RuntimeError(f"socket refused: {message}")


async def main(ws_url: str, origin: str, cookie: str, execution_pk: int, clients: int, last: int) -> None:
    url = f"{ws_url}/ws/executions/{execution_pk}/"
    readies = [asyncio.Event() for _ in range(clients)]
    receipts: list[list[tuple[int, float]]] = [[] for _ in range(clients)]
    tasks = [asyncio.create_task(_client(url, origin, cookie, last, readies[n], receipts[n])) for n in range(clients)]
    await asyncio.wait_for(asyncio.gather(*(ready.wait() for ready in readies)), 30)
    print("READY", flush=True)
    await asyncio.wait_for(asyncio.gather(*tasks), DEADLINE_SECONDS)
    print(json.dumps({"receipts": receipts}), flush=True)


if __name__ == "__main__":
    ws, origin, cookie, pk, count, last_position = sys.argv[1:7]
    asyncio.run(main(ws, origin, cookie, int(pk), int(count), int(last_position)))
