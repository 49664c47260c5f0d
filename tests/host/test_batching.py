"""The worker's batched writer: bursts in one transaction, quiet streams flushed by the timer, order kept."""

from __future__ import annotations

import asyncio
import time

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.db import connection

from runs.models import JournalEntry, Run, TimelineEvent
from runs.services.store import leases
from runs.services.timeline import RunProjection
from runs.services.worker import BatchWriter
from tests.support import factories
from tests.support.stream_items import text_deltas

pytestmark = pytest.mark.django_db


class Counting(RunProjection):
    """A projection that remembers the size of every batch it wrote."""

    def __init__(self, run: Run) -> None:
        super().__init__(run)
        self.batches: list[int] = []

    def write(self, prepared, *, lease):
        entries = super().write(prepared, lease=lease)
        self.batches.append(prepared.size)
        return entries


def _positions(run: Run) -> list[int]:
    return list(TimelineEvent.objects.filter(execution=run.execution).values_list("position", flat=True))


def test_a_burst_is_written_in_one_transaction_in_stream_order():
    run, lease = factories.leased_run()
    items = text_deltas(run, 120)
    projection = Counting(run)

    async def write() -> int:
        writer = BatchWriter(projection, lease, max_items=50, max_delay=60)
        for item in items:
            await writer.add(item)
        last = await writer.flush()
        await writer.close()
        return last

    assert async_to_sync(write)() == len(items) - 1
    # The stream never yielded before the flush: the three batches it handed off queued up and were committed
    # together (group commit).
    assert projection.batches == [122]
    assert list(run.journal.values_list("source_sequence", flat=True)) == list(range(len(items)))
    assert _positions(run) == list(range(1, len(_positions(run)) + 1))
    contents = TimelineEvent.objects.filter(run=run, event_type="TEXT_MESSAGE_CONTENT").order_by("position")
    assert [event.event["delta"] for event in contents][-2:] == ["120 ", "121 "]


def test_items_of_a_quiet_stream_are_written_without_waiting_for_more():
    run, lease = factories.leased_run()
    items = text_deltas(run, 1)

    async def write() -> int:
        writer = BatchWriter(RunProjection(run), lease, max_items=500, max_delay=0.01)
        for item in items:
            await writer.add(item)
        # No further item, no flush: the timer writes the batch (polled, not timed).
        for _ in range(500):
            if await sync_to_async(JournalEntry.objects.filter(run=run).count)() == len(items):
                break
            await asyncio.sleep(0.01)
        await writer.close()
        return writer.last_index

    assert async_to_sync(write)() == len(items) - 1
    assert run.journal.count() == len(items)


def test_a_failed_write_is_raised_by_the_next_call_and_nothing_more_is_written():
    run, lease = factories.leased_run()
    items = text_deltas(run, 5)
    leases.release(lease, "failed")

    async def write() -> None:
        writer = BatchWriter(RunProjection(run), lease, max_items=2, max_delay=60)
        for item in items[:2]:
            await writer.add(item)
        # The write overlaps with the stream; its failure reaches the next call after it.
        with pytest.raises(leases.LeaseLost):
            await writer.flush()
        with pytest.raises(leases.LeaseLost):
            await writer.add(items[2])
        await writer.close()

    async_to_sync(write)()
    assert not run.journal.exists() and not TimelineEvent.objects.exists()


class Slow(Counting):
    """A projection whose writes take a while, and which notes how many batches were queued at each write."""

    def __init__(self, run: Run) -> None:
        super().__init__(run)
        self.writer: BatchWriter | None = None
        self.queued: list[int] = []

    def write(self, prepared, *, lease):
        assert self.writer is not None
        self.queued.append(self.writer.queued)
        time.sleep(0.02)
        return super().write(prepared, lease=lease)


def test_under_backpressure_the_stream_waits_for_room_and_the_order_is_kept():
    run, lease = factories.leased_run()
    items = text_deltas(run, 200)
    projection = Slow(run)
    seen: list[int] = []

    async def write() -> int:
        writer = projection.writer = BatchWriter(projection, lease, max_items=10, max_delay=60, max_queued=2)
        for item in items:
            await writer.add(item)
            seen.append(writer.queued)
        last = await writer.flush()
        await writer.close()
        return last

    assert async_to_sync(write)() == len(items) - 1
    # The producer ran ahead of the writes (they overlapped) but never by more than the bound: an `add` that
    # hands off a batch returns once at most 2 are queued, so a write sees itself and at most 2 behind it.
    assert max(seen) <= 2 and max(projection.queued) == 3
    assert sum(projection.batches) == len(items)
    assert list(run.journal.order_by("index").values_list("source_sequence", flat=True)) == list(range(len(items)))
    assert _positions(run) == list(range(1, len(_positions(run)) + 1))


class Watching(Counting):
    """A projection that notes how deep in atomic blocks each write ran (the test's own transaction included)."""

    def __init__(self, run: Run) -> None:
        super().__init__(run)
        self.depth: list[int] = []

    def write(self, prepared, *, lease):
        self.depth.append(len(connection.savepoint_ids))
        return super().write(prepared, lease=lease)


def test_a_checkpoint_commits_the_last_batch_and_its_record_in_one_transaction():
    run, lease = factories.leased_run()
    items = text_deltas(run, 30)
    projection = Watching(run)
    recorded: list[tuple[int, int]] = []

    def record(last_index: int) -> str:
        # What the record sees is the batch it follows, written in the transaction it is part of.
        recorded.append((last_index, JournalEntry.objects.filter(run=run).count()))
        return "recorded"

    async def write() -> str:
        writer = BatchWriter(projection, lease, max_items=20, max_delay=60)
        for item in items[:20]:
            await writer.add(item)
        # The first batch's write starts before the checkpoint, which would otherwise take that batch in too.
        await asyncio.sleep(0.005)
        for item in items[20:]:
            await writer.add(item)
        outcome = await writer.checkpoint(record)
        await writer.close()
        return outcome

    assert async_to_sync(write)() == "recorded"
    # The first 20 items went on their own; the other 10 inside the block that also ran the record.
    assert len(projection.batches) == 2 and projection.depth[1] == projection.depth[0] + 1
    assert recorded == [(len(items) - 1, len(items))]


def test_at_a_checkpoint_the_batches_still_queued_join_its_write_behind_the_one_in_flight():
    run, lease = factories.leased_run()
    items = text_deltas(run, 25)
    projection = Slow(run)

    async def write() -> str:
        writer = projection.writer = BatchWriter(projection, lease, max_items=10, max_delay=60, max_queued=10)
        for item in items[:10]:
            await writer.add(item)
        # The first batch's write starts (and, slow, is still in flight or just done) before the next is handed off.
        await asyncio.sleep(0.005)
        for item in items[10:]:
            await writer.add(item)
        outcome = await writer.checkpoint(lambda last_index: f"recorded at {last_index}")
        await writer.close()
        return outcome

    assert async_to_sync(write)() == f"recorded at {len(items) - 1}"
    # Two writes, not three: the second batch went with the last five items and the record.
    assert len(projection.batches) == 2
    assert list(run.journal.order_by("index").values_list("source_sequence", flat=True)) == list(range(len(items)))
    assert _positions(run) == list(range(1, len(_positions(run)) + 1))


def test_a_checkpoint_whose_record_fails_keeps_the_batch_and_raises_after_it_committed():
    run, lease = factories.leased_run()
    items = text_deltas(run, 5)

    class Refused(Exception):
        pass

    def record(last_index: int) -> None:
        run.__class__.objects.filter(pk=run.pk).update(failure_message="written by the failed record")
        raise Refused

    async def write() -> BatchWriter:
        writer = BatchWriter(RunProjection(run), lease, max_items=500, max_delay=60)
        for item in items:
            await writer.add(item)
        with pytest.raises(Refused):
            await writer.checkpoint(record)
        await writer.close()
        return writer

    writer = async_to_sync(write)()
    # The batch is stored (the worker's observer still matches the database), the record's own writes are not.
    assert not writer.failed and writer.last_index == len(items) - 1
    assert run.journal.count() == len(items)
    run.refresh_from_db()
    assert run.failure_message == ""
