"""The worker's write loop, replayed from a cached synthetic run (what `runner._work` does per item).

Items are collected into batches of `runner.BATCH_SIZE`; a batch is written by `RunProjection.record`; at a
checkpoint boundary the batch is flushed and `checkpoints.record` stores the state the stream exported there;
the result goes through `runner._record_result`. Every write goes through `sync_to_async`, as in the worker.
`pace` (items per second) spaces the items out like a live run; `committed(first, last, at)` learns when the
batch holding source items `first..last` committed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async

from .synthetic import SyntheticRun

__all__ = ("write_like_worker",)

Committed = Callable[[int, int, float], None]


async def write_like_worker(
    run: Any,
    lease: Any,
    projection: Any,
    synthetic: SyntheticRun,
    *,
    start: int = 0,
    pace: float | None = None,
    committed: Committed | None = None,
) -> None:
    from django.db import transaction

    from runs.harness.events import HarnessRunResultEvent
    from runs.models import CheckpointKind
    from runs.services import checkpoints, runner

    boundaries = {boundary.position: boundary for boundary in synthetic.boundaries}
    db = sync_to_async
    pending: list[Any] = []
    first = start
    last_index = start - 1

    def record(batch: list[Any], first: int, last: int) -> Any:
        if committed is None:
            return projection.record(batch, lease=lease)
        # The mark is registered before `record` registers its publication, so it runs first after commit.
        with transaction.atomic():
            transaction.on_commit(lambda: committed(first, last, time.time()))
            return projection.record(batch, lease=lease)

    async def flush(position: int) -> None:
        nonlocal last_index, first
        if pending:
            entries = await db(record)(list(pending), first, position)
            pending.clear()
            last_index = entries[-1].index
        first = position + 1

    began = time.monotonic()
    for position in range(start, synthetic.size):
        if pace is not None:
            delay = began + (position - start) / pace - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
        item = synthetic.items[position]
        pending.append(item)
        boundary = boundaries.get(position)
        if boundary is not None:
            await flush(position)
            await db(checkpoints.record)(
                run,
                boundary.state,
                lease=lease,
                kind=CheckpointKind.BOUNDARY,
                journal_index=last_index,
                pending=boundary.pending,
                metadata={"boundary": boundary.boundary},
            )
        elif isinstance(item, HarnessRunResultEvent) or len(pending) >= runner.BATCH_SIZE:
            await flush(position)
    await db(runner._record_result)(run, lease, synthetic.items[-1].result, last_index)
