"""Stream helpers shared by the harness tests."""

from __future__ import annotations

from typing import Any

from runs.harness import HarnessRunStream, HarnessStreamEvent


async def collect(stream: HarnessRunStream[Any]) -> list[HarnessStreamEvent[Any]]:
    """Enter `stream` and return every item it yields, the terminal result last."""
    async with stream:
        return [item async for item in stream]
