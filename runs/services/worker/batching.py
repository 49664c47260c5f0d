"""The worker's journal writer: stream items committed in adaptive batches, behind the stream.

Every transaction has a fixed cost (the lease check, the commit, a hop to the database thread, one
publication), so a burst of text deltas should cost one transaction, not one each — while an item should
still reach the browser within a few tens of milliseconds when the stream goes quiet. Items therefore
wait in a batch that is handed to the writer when it holds `MAX_ITEMS`, when its first item has waited
`MAX_DELAY` seconds (checked as items arrive, and by a timer when none do), or when the worker asks for it:
at a checkpoint boundary, written in the same transaction as the boundary's checkpoint, and at the run's
result, written in the same transaction as the run's outcome.

A batch is prepared (encoded, observed, masked: `RunProjection.prepare`) on the event loop when it is handed
off, and only its insert goes to the database thread (`RunProjection` says why). Handed-off batches are written
by one task, in order, while the stream goes on producing: the engine waits for the database only when
`MAX_QUEUED` batches are already waiting, and at the points that need the journal to be durable (a boundary's
`checkpoint`, the result's `finish`). The batches that queued up while a write ran are written together in the next
transaction (group commit); at a boundary or the result they join its write instead, so the run waits for one
transaction after the one in flight, not two. The writes of all runs on one event loop go through its
`CommitGroup`, which commits those of different runs together too. A worker killed meanwhile loses what was not
committed, as it always could; the lease check of each write still fences a stale worker.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar, cast

from asgiref.sync import sync_to_async
from django.db import transaction

from runs.harness import HarnessStreamEvent

from ..store.leases import Lease
from ..timeline.projection import PreparedWrite, RunProjection
from .commit_group import CommitGroup

__all__ = ("MAX_DELAY", "MAX_ITEMS", "MAX_QUEUED", "BatchWriter")

T = TypeVar("T")

MAX_ITEMS = 500
MAX_DELAY = 0.02
MAX_QUEUED = 4


class BatchWriter:
    """Collects a run's stream items and writes them through its `RunProjection`, in order, in batches.

    A batch joins the queue synchronously when it is handed off, and one task writes the queue front to
    back, so the journal gets the items exactly in stream order. A failed write is kept and raised by a
    later `add`, `flush` or `finish`; batches queued behind it are not written: after it the projection no
    longer matches the database, so nothing more is written through this writer.
    """

    def __init__(
        self,
        projection: RunProjection,
        lease: Lease,
        *,
        max_items: int = MAX_ITEMS,
        max_delay: float = MAX_DELAY,
        max_queued: int = MAX_QUEUED,
        group: CommitGroup | None = None,
    ) -> None:
        self._projection = projection
        self._group = group
        self._lease = lease
        self._max_items = max_items
        self._max_delay = max_delay
        self._max_queued = max_queued
        self._pending: list[HarnessStreamEvent[Any]] = []
        self._first_at = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._queue: deque[PreparedWrite] = deque()
        # How many batches at the queue's front the writing task is committing now.
        self._in_flight = 0
        self._changed = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None
        self._failure: BaseException | None = None
        self.last_index = -1
        """The journal index of the last item written."""

    @property
    def failed(self) -> bool:
        """Whether a write failed: the projection has then seen items the database does not hold."""
        return self._failure is not None

    @property
    def queued(self) -> int:
        """Batches handed off and not written yet (the one being written included)."""
        return len(self._queue)

    async def add(self, item: HarnessStreamEvent[Any]) -> None:
        """Collect an item; hand the batch off if it is full or its first item waited long enough.

        Waits only when, after the hand-off, more than `max_queued` batches are queued.
        """
        self._raise_failure()
        if not self._projection.loaded:
            await self._load()
        loop = asyncio.get_running_loop()
        if not self._pending:
            self._first_at = loop.time()
            self._timer = loop.call_later(self._max_delay, self._hand_off)
        self._pending.append(item)
        if len(self._pending) >= self._max_items or loop.time() - self._first_at >= self._max_delay:
            self._hand_off()
            await self._drain(self._max_queued)

    async def flush(self) -> int:
        """Write everything collected so far; returns the journal index of the last item written."""
        self._raise_failure()
        self._hand_off()
        await self._drain(0)
        self._raise_failure()
        return self.last_index

    async def finish(self, last: HarnessStreamEvent[Any], record_outcome: Callable[[int], T]) -> T:
        """Write the stream's last item and the run's outcome in one transaction, after everything before it.

        A worker that dies between the two would otherwise leave a journal that ends with the result while the
        run still looks unfinished, and recovery would redo work that already completed. The result's state is
        not journaled: `record_outcome` stores it as the checkpoint at the index it is given.
        """
        return await self._write_then(record_outcome, last=last, keep_batch=False)

    async def checkpoint(self, record: Callable[[int], T]) -> T:
        """Write everything collected so far, then `record(last_index)` (a boundary's checkpoint), in one
        transaction: one wait for the database instead of a flush and then a transaction of its own.

        If `record` fails, the batch still commits, as it would have before a checkpoint of its own, and the
        error is raised after.
        """
        return await self._write_then(record, keep_batch=True)

    async def _write_then(
        self, record: Callable[[int], T], *, last: HarnessStreamEvent[Any] | None = None, keep_batch: bool
    ) -> T:
        self._raise_failure()
        self._stop_timer()
        items, self._pending = self._pending, []
        if last is not None:
            items.append(last)
        if items:
            await self._load()
        try:
            parts = self._take_queued()
            if items:
                parts.append(self._projection.prepare(items, state_checkpointed=last is not None))
        except BaseException as exc:
            self._failure = exc
            raise
        prepared = PreparedWrite.joined(parts) if parts else None
        # After the write in flight, if there is one.
        await self._drain(0)
        self._raise_failure()

        def write() -> tuple[T | None, Exception | None]:
            with transaction.atomic():
                if prepared is not None:
                    entries = self._projection.write(prepared, lease=self._lease)
                    self.last_index = entries[-1].index
                if not keep_batch:
                    return record(self.last_index), None
                try:
                    with transaction.atomic():
                        return record(self.last_index), None
                except Exception as exc:
                    return None, exc

        try:
            value, refused = await self._commits().write(write)
        except BaseException as exc:
            self._failure = exc
            raise
        if refused is not None:
            raise refused
        return cast(T, value)

    async def close(self) -> None:
        """Stop the timer and the writing task once the queued batches are written (a failure is kept, not raised)."""
        self._stop_timer()
        await self._drain(0)
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _take_queued(self) -> list[PreparedWrite]:
        """The batches handed off that no write has taken yet, out of the queue."""
        queued = list(self._queue)[self._in_flight :]
        for _ in queued:
            self._queue.pop()
        return queued

    def _hand_off(self) -> None:
        self._stop_timer()
        if not self._pending:
            return
        items, self._pending = self._pending, []
        if self._failure is not None:
            return
        try:
            self._queue.append(self._projection.prepare(items))
        except Exception as exc:
            # Raised by the next `add`, `flush` or `finish`, as a failed write is (this may run from the timer).
            self._failure = exc
            return
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._write_queue(), name="journal-writer")

    async def _drain(self, most: int) -> None:
        async with self._changed:
            await self._changed.wait_for(lambda: len(self._queue) <= most)

    async def _write_queue(self) -> None:
        while self._queue:
            # Group commit: the batches handed off while the previous write ran share one transaction, so a
            # database that falls behind the stream pays fewer fixed costs per item instead of falling further.
            batches = self._in_flight = len(self._queue)
            prepared = PreparedWrite.joined(self._queue)
            if self._failure is None:
                try:
                    entries = await self._commits().write(partial(self._projection.write, prepared, lease=self._lease))
                    self.last_index = entries[-1].index
                except asyncio.CancelledError:
                    raise
                except BaseException as exc:
                    self._failure = exc
            for _ in range(batches):
                self._queue.popleft()
            self._in_flight = 0
            async with self._changed:
                self._changed.notify_all()

    def _commits(self) -> CommitGroup:
        if self._group is None:
            # Made on first use: the loop that runs the writes is only known inside it.
            self._group = CommitGroup.of_running_loop()
        return self._group

    async def _load(self) -> None:
        # Once, before the first batch is prepared: preparing reads nothing from the database.
        if not self._projection.loaded:
            await sync_to_async(self._projection.load)()

    def _raise_failure(self) -> None:
        if self._failure is not None:
            raise self._failure
