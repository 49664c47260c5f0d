"""Websocket viewers for the viewers benchmark, in a process of their own (no Django here).

`python -m bench.viewer_clients <ws url> <origin> <cookie> <execution pk> <clients> <ramp s> <last position>`
opens `clients` viewers spread evenly over `ramp` seconds (0: all at once), each subscribing from the start
and reading until it has `last position`. The last line printed is JSON: per viewer, whether it was served,
the sha256 of every event frame it got (in order), and the receipt time of each frame that arrived after its
`ready` (the live ones); plus the first errors and the CPU time the process used.

A viewer only notes the time and keeps the text of each event message as it arrives; it decodes them after
the last one. Decoding every message on arrival made the client processes, not the server, what delayed the
receipt times of a thousand viewers on a loaded 2-core machine.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
import time

from websockets.asyncio.client import connect

DEADLINE_SECONDS = 180
# Event messages are the server's compact text (`read_side.frame_text`); everything else is decoded on arrival.
EVENT_PREFIX = '{"type":"event'


async def _viewer(url: str, origin: str, cookie: str, last: int, delay: float) -> dict:
    await asyncio.sleep(delay)
    # Event message texts with their receipt times, and whether each arrived after `ready`.
    received: list[tuple[str, float, bool]] = []
    ready = False
    # A frame's position in the compact text is followed by a comma; `ready`'s is not.
    end = f'"position":{last},'
    async with connect(
        url, origin=origin, additional_headers={"Cookie": cookie}, max_size=2**20, open_timeout=120
    ) as socket:
        await socket.send(json.dumps({"type": "subscribe", "after": None}))
        pieces: list[str] = []
        while True:
            text = await socket.recv()
            at = time.time()
            if not text.startswith(EVENT_PREFIX):
                message = json.loads(text)
                if message["type"] == "piece":
                    pieces.append(message["data"])
                    if len(pieces) < message["count"]:
                        continue
                    text, pieces = "".join(pieces), []
                    message = json.loads(text)
                if message["type"] == "ready":
                    ready = True
                elif message["type"] == "error":
                    raise RuntimeError(f"refused: {message}")
                if not text.startswith(EVENT_PREFIX):
                    continue
            received.append((text, at, ready))
            if end in text:
                break
    frames: list[dict] = []
    live: list[tuple[int, float]] = []
    for text, at, after_ready in received:
        message = json.loads(text)
        batch = message["events"] if message["type"] == "events" else [message]
        frames += batch
        if after_ready:
            live += [(frame["position"], at) for frame in batch]
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
    summary = {"viewers": viewers, "errors": errors[:5], "cpu_s": time.process_time()}
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    ws, origin, cookie, pk, count, ramp_seconds, last_position = sys.argv[1:8]
    asyncio.run(main(ws, origin, cookie, int(pk), int(count), float(ramp_seconds), int(last_position)))
