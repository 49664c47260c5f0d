"""The worker's journal writer: stream items committed in adaptive batches.

Every transaction has a fixed cost (the lease check, the commit, a hop to the database thread, one
publication), so a burst of text deltas should cost one transaction, not one each — while an item should
still reach the browser within a few tens of milliseconds when the stream goes quiet. Items therefore
wait in a batch that is written when it holds `MAX_ITEMS`, when its first item has waited `MAX_DELAY`
seconds (checked as items arrive, and by a timer when none do), or when the worker asks for it: at a
checkpoint boundary, and at the run's result, which is written in the same transaction as the run's outcome.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.db import transaction

from runs.harness.events import HarnessStreamEvent

from .leases import Lease
from .projection import RunProjection

__all__ = ("MAX_DELAY", "MAX_ITEMS", "BatchWriter")

T = TypeVar("T")

MAX_ITEMS = 500
MAX_DELAY = 0.02


class BatchWriter:
    """Collects a run's stream items and writes them through its `RunProjection`, in order, in batches.

    Writes never overlap (one lock), and each takes every item collected so far, so the journal gets the
    items exactly in stream order. A failed write is kept and raised by the next `add` or `flush`: after it
    the projection no longer matches the database, so nothing more is written through this writer.
    """

    def __init__(
        self, projection: RunProjection, lease: Lease, *, max_items: int = MAX_ITEMS, max_delay: float = MAX_DELAY
    ) -> None:
        self._projection = projection
        self._lease = lease
        self._max_items = max_items
        self._max_delay = max_delay
        self._pending: list[HarnessStreamEvent[Any]] = []
        self._first_at = 0.0
        self._lock = asyncio.Lock()
        self._timer: asyncio.TimerHandle | None = None
        self._timed: asyncio.Task[None] | None = None
        self._failure: BaseException | None = None
        self.last_index = -1
        """The journal index of the last item written."""

    async def add(self, item: HarnessStreamEvent[Any]) -> None:
        """Collect an item; write the batch if it is full or its first item waited long enough."""
        self._raise_failure()
        loop = asyncio.get_running_loop()
        if not self._pending:
            self._first_at = loop.time()
            self._timer = loop.call_later(self._max_delay, self._due)
        self._pending.append(item)
        if len(self._pending) >= self._max_items or loop.time() - self._first_at >= self._max_delay:
            await self.flush()

    async def flush(self) -> int:
        """Write everything collected so far; returns the journal index of the last item written."""
        async with self._lock:
            self._raise_failure()
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if self._pending:
                batch, self._pending = self._pending, []
                try:
                    entries = await sync_to_async(self._projection.record)(batch, lease=self._lease)
                except BaseException as exc:
                    self._failure = exc
                    raise
                self.last_index = entries[-1].index
        return self.last_index

    async def finish(self, last: HarnessStreamEvent[Any], record_outcome: Callable[[int], T]) -> T:
        """Write the stream's last item and the run's outcome in one transaction.

        A worker that dies between the two would otherwise leave a journal that ends with the result while the
        run still looks unfinished, and recovery would redo work that already completed.
        """
        async with self._lock:
            self._raise_failure()
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            batch, self._pending = [*self._pending, last], []

            def write() -> T:
                with transaction.atomic():
                    entries = self._projection.record(batch, lease=self._lease)
                    self.last_index = entries[-1].index
                    return record_outcome(self.last_index)

            try:
                return await sync_to_async(write)()
            except BaseException as exc:
                self._failure = exc
                raise

    async def close(self) -> None:
        """Stop the timer; a write it already started is finished (its failure is not raised here)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._timed is not None:
            await asyncio.gather(self._timed, return_exceptions=True)

    def _due(self) -> None:
        self._timer = None
        if self._pending and (self._timed is None or self._timed.done()):
            self._timed = asyncio.create_task(self._flush_quietly())

    async def _flush_quietly(self) -> None:
        # The failure is kept by `flush` and raised to the worker's loop by its next `add` or `flush`.
        try:
            await self.flush()
        except Exception:
            return

    def _raise_failure(self) -> None:
        if self._failure is not None:
            raise self._failure
