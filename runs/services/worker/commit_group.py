"""Group commit across runs: the journal writes of every run on one event loop share transactions.

A worker carries many runs on one event loop (runs/worker/), and each transaction has a fixed cost (the commit,
a hop to the database thread; on SQLite one writer at a time for the whole database). Each run's `BatchWriter`
already groups its own batches; this groups the writes of different runs. A write waits while one is being
committed, and the writes that queued up meanwhile (up to `MAX_WRITES`) commit in the next transaction, so the
more runs write at once, the fewer transactions per item.

Each write is atomic by itself, so in a group it is a savepoint: one run's failure (a lost lease, a refused row)
rolls back only its own rows, and the others commit. Per run the order is its writer's, which hands over one
write at a time and waits for it. If the transaction itself fails, every write in it fails: each of those runs
stops writing, as a single failed transaction always stopped a run.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar
from weakref import WeakKeyDictionary

from asgiref.sync import sync_to_async
from django.db import transaction

__all__ = ("MAX_WRITES", "CommitGroup")

T = TypeVar("T")

# Bounds one transaction (how long it holds SQLite's write lock and the runs' row locks), not the throughput.
MAX_WRITES = 64


@dataclass(frozen=True)
class _Outcome:
    value: Any = None
    error: Exception | None = None


class CommitGroup:
    """Commits the writes handed to it, together, in the order they came; one per event loop (`of_running_loop`)."""

    def __init__(self, *, max_writes: int = MAX_WRITES) -> None:
        self._max_writes = max_writes
        self._waiting: deque[tuple[Callable[[], Any], asyncio.Future[Any]]] = deque()
        self._task: asyncio.Task[None] | None = None
        self.writes = 0
        """Writes committed or refused so far."""
        self.transactions = 0
        """Transactions they took (a bench's batch size is `writes / transactions`)."""

    @classmethod
    def of_running_loop(cls) -> CommitGroup:
        loop = asyncio.get_running_loop()
        group = _groups.get(loop)
        if group is None:
            group = _groups[loop] = cls()
        return group

    async def write(self, work: Callable[[], T]) -> T:
        """Run `work` in the next group's transaction. `work` is atomic by itself: it does its writes inside a
        `transaction.atomic()` of its own, which in a group is its savepoint."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        # The work runs in its run's own context, as a write of its own would: what it reads from context
        # variables (the run's publication sender, for one) must be the run's, not the group task's.
        self._waiting.append((partial(contextvars.copy_context().run, work), future))
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._commit_waiting(), name="commit-group")
        return await future

    async def _commit_waiting(self) -> None:
        while self._waiting:
            group = [self._waiting.popleft() for _ in range(min(len(self._waiting), self._max_writes))]
            try:
                outcomes = await sync_to_async(_commit)([work for work, _ in group])
            except BaseException as exc:
                for _, future in group:
                    if not future.done():
                        future.set_exception(exc)
                if isinstance(exc, asyncio.CancelledError):
                    raise
                continue
            finally:
                self.writes += len(group)
                self.transactions += 1
            for (_, future), outcome in zip(group, outcomes, strict=True):
                # A writer cancelled meanwhile (its worker is stopping) no longer waits for its outcome.
                if future.done():
                    continue
                if outcome.error is None:
                    future.set_result(outcome.value)
                else:
                    future.set_exception(outcome.error)


def _commit(works: list[Callable[[], Any]]) -> list[_Outcome]:
    if len(works) == 1:
        # Alone, a write's own transaction is the group's.
        return [_attempt(works[0])]
    with transaction.atomic():
        return [_attempt(work) for work in works]


def _attempt(work: Callable[[], Any]) -> _Outcome:
    try:
        return _Outcome(value=work())
    except Exception as exc:
        return _Outcome(error=exc)


_groups: WeakKeyDictionary[asyncio.AbstractEventLoop, CommitGroup] = WeakKeyDictionary()
