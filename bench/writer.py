"""The worker's write loop, replayed from a cached synthetic run (what `runner._work` does per item).

Items go through the worker's `BatchWriter` (adaptive batches); a batch is prepared and written by the
`RunProjection`; at a checkpoint boundary the batch is flushed and `checkpoints.record` stores the state the
stream exported there; the result goes through `BatchWriter.finish` with `runner._record_result`. Every write goes
through `sync_to_async`, as in the worker.
`pace` (items per second) spaces the items out like a live run; `committed(first, last, at)` learns when the
batch holding source items `first..last` committed; `created(position, at)` learns when an item was handed to
the writer (as the engine yields it). `export(boundary)` stands for the stream's `export_state()`
at a boundary (by default the state the generator exported there). Returns the seconds the run's end took
(the result item and the outcome with the terminal checkpoint), so a caller can report them apart.
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
    export: Callable[[Any], Any] | None = None,
    created: Callable[[int, float], None] | None = None,
) -> float:
    from django.db import transaction

    from runs.harness import HarnessRunResultEvent
    from runs.models import CheckpointKind
    from runs.services.store import checkpoints
    from runs.services.timeline import worker_sender
    from runs.services.worker import BatchWriter, runner

    boundaries = {boundary.position: boundary for boundary in synthetic.boundaries}
    db = sync_to_async

    class _Marked:
        def __init__(self) -> None:
            self.first = start
            self.loaded = False

        def load(self) -> None:
            projection.load()
            self.loaded = True

        def prepare(self, batch: Any, **options: Any) -> Any:
            return projection.prepare(batch, **options)

        def write(self, prepared: Any, *, lease: Any) -> Any:
            if committed is None:
                return projection.write(prepared, lease=lease)
            first, last = self.first, self.first + prepared.size - 1
            self.first = last + 1
            with transaction.atomic():
                transaction.on_commit(lambda: committed(first, last, time.time()))
                return projection.write(prepared, lease=lease)

    chain = checkpoints.CheckpointChain()
    async with worker_sender():
        # A stand-in for the RunProjection that records through it and notes when each batch committed.
        writer = BatchWriter(_Marked(), lease)  # type: ignore[arg-type]
        began = time.monotonic()
        for position in range(start, synthetic.size):
            if pace is not None:
                delay = began + (position - start) / pace - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
            item = synthetic.items[position]
            if created is not None:
                created(position, time.time())
            if isinstance(item, HarnessRunResultEvent):
                break
            await writer.add(item)
            boundary = boundaries.get(position)
            if boundary is not None:
                last_index = await writer.flush()
                await db(checkpoints.record)(
                    run,
                    boundary.state if export is None else export(boundary),
                    lease=lease,
                    kind=CheckpointKind.BOUNDARY,
                    journal_index=last_index,
                    pending=boundary.pending,
                    metadata={"boundary": boundary.boundary},
                    chain=chain,
                )
        await writer.flush()
        ended = time.perf_counter()
        result = synthetic.items[-1]
        await writer.finish(result, lambda last: runner._record_result(run, lease, result.result, last, chain))
        await writer.close()
        return time.perf_counter() - ended
