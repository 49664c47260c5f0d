"""Hundreds of viewers subscribing at once are all served (the channel layer once failed past 100 of them)."""

from __future__ import annotations

import asyncio
import json

from websockets.asyncio.client import connect

from tests.support import factories
from tests.support.sockets import cookie_of, frames_of, stored_frames

VIEWERS = 300


def test_300_viewers_opened_at_once_all_get_the_whole_timeline(live_stack, operator_user):
    run = factories.make_run(factories.make_execution())
    factories.append_events(run, factories.text_run_events(run, [f"part {i} " for i in range(20)]))
    stored = stored_frames(run.execution_id)
    cookie = cookie_of(operator_user)

    async def viewer() -> list[dict]:
        async with connect(
            f"{live_stack.ws_url}/ws/executions/{run.execution_id}/",
            origin=live_stack.base_url,
            additional_headers={"Cookie": cookie},
            open_timeout=60,
        ) as socket:
            await socket.send(json.dumps({"type": "subscribe", "after": None}))
            frames = []
            while (message := json.loads(await socket.recv()))["type"] != "ready":
                frames += frames_of(message)
            return frames

    async def all_viewers() -> list[list[dict] | BaseException]:
        return await asyncio.gather(*(viewer() for _ in range(VIEWERS)), return_exceptions=True)

    results = asyncio.run(asyncio.wait_for(all_viewers(), timeout=240))
    failures = [repr(result) for result in results if isinstance(result, BaseException)]
    assert failures == [], (
        f"{len(failures)} of {VIEWERS} viewers failed, e.g. {failures[:3]}\n{live_stack.daphne.log()[-3000:]}"
    )
    assert all(result == stored for result in results)
