"""Websocket viewers for the viewers benchmark, in a process of their own (no Django here).

`python -m bench.viewer_clients <ws url> <origin> <cookie> <execution pk> <clients> <ramp s> <last position>`
opens `clients` viewers spread evenly over `ramp` seconds (0: all at once), each subscribing from the start
and reading until it has `last position`. The last line printed is JSON: per viewer, whether it was served,
the sha256 of every event frame it got (in order), and the receipt time of each frame that arrived after its
`ready` (the live ones); plus the first errors.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
import time

from websockets.asyncio.client import connect

DEADLINE_SECONDS = 180


async def _viewer(url: str, origin: str, cookie: str, last: int, delay: float) -> dict:
    await asyncio.sleep(delay)
    frames: list[dict] = []
    live: list[tuple[int, float]] = []
    ready = False
    async with connect(
        url, origin=origin, additional_headers={"Cookie": cookie}, max_size=2**20, open_timeout=120
    ) as socket:
        await socket.send(json.dumps({"type": "subscribe", "after": None}))
        pieces: list[str] = []
        while not frames or frames[-1]["position"] < last:
            message = json.loads(await socket.recv())
            at = time.time()
            if message["type"] == "piece":
                pieces.append(message["data"])
                if len(pieces) < message["count"]:
                    continue
                message, pieces = json.loads("".join(pieces)), []
            if message["type"] == "ready":
                ready = True
            elif message["type"] in ("event", "events"):
                batch = message["events"] if message["type"] == "events" else [message]
                frames += batch
                if ready:
                    live += [(frame["position"], at) for frame in batch]
            elif message["type"] == "error":
                raise RuntimeError(f"refused: {message}")
    digest = hashlib.sha256(json.dumps(frames, sort_keys=True).encode()).hexdigest()
    return {"served": True, "digest": digest, "live": live}


async def main(ws_url: str, origin: str, cookie: str, execution_pk: int, clients: int, ramp: float, last: int) -> None:
    url = f"{ws_url}/ws/executions/{execution_pk}/"
    delays = [ramp * n / clients for n in range(clients)]
    results = await asyncio.wait_for(
        asyncio.gather(*(_viewer(url, origin, cookie, last, d) for d in delays), return_exceptions=True),
        DEADLINE_SECONDS,
    )
    errors = [repr(r) for r in results if isinstance(r, BaseException)]
    viewers = [r if isinstance(r, dict) else {"served": False, "digest": "", "live": []} for r in results]
    print(json.dumps({"viewers": viewers, "errors": errors[:5]}), flush=True)


if __name__ == "__main__":
    ws, origin, cookie, pk, count, ramp_seconds, last_position = sys.argv[1:8]
    asyncio.run(main(ws, origin, cookie, int(pk), int(count), float(ramp_seconds), int(last_position)))
