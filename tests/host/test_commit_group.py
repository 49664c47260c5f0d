"""Group commit across runs: the writes of runs sharing an event loop commit together, each run's own order is
kept, and one run's failed write (a lost lease) leaves the others' rows committed."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from functools import partial

import pytest
from asgiref.sync import async_to_sync
from django.db import transaction

from runs.models import JournalEntry, Run, TimelineEvent
from runs.services.store import leases
from runs.services.timeline import RunProjection
from runs.services.worker import BatchWriter, CommitGroup
from tests.support import factories
from tests.support.stream_items import text_deltas

# Committed for real (publications included), as the worker's writes are.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("redis_settings")]


class OpenTransaction:
    """A write that holds the group's transaction open until released, so that other writes queue up behind it."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self) -> str:
        with transaction.atomic():
            self.entered.set()
            assert self.release.wait(30), "the test never released the gate"
        return "gate"


async def _wait_until(condition, what: str) -> None:
    for _ in range(3000):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def _stream(run: Run, writer: BatchWriter, items: list) -> asyncio.Future:
    async def produce() -> int:
        for item in items:
            await writer.add(item)
        last = await writer.flush()
        await writer.close()
        return last

    return asyncio.ensure_future(produce())


def test_writes_of_several_runs_queued_behind_a_commit_share_the_next_transaction():
    pairs = [factories.leased_run(run_id=f"run-{n:032x}") for n in range(3)]
    streams = {run.pk: text_deltas(run, 40) for run, _ in pairs}
    # Loaded before the gate opens its transaction: a writer's first `add` would load through the database thread,
    # which the gate holds.
    projections = {run.pk: RunProjection(run) for run, _ in pairs}
    for projection in projections.values():
        projection.load()

    async def write() -> tuple[CommitGroup, list[int]]:
        group = CommitGroup()
        gate = OpenTransaction()
        held = asyncio.ensure_future(group.write(gate))
        await _wait_until(gate.entered.is_set, "the gate's transaction")
        writers = [
            _stream(
                run, BatchWriter(projections[run.pk], lease, max_items=500, max_delay=60, group=group), streams[run.pk]
            )
            for run, lease in pairs
        ]
        # Every run hands over its write while the gate's transaction is open ...
        await _wait_until(lambda: len(group._waiting) == len(pairs), "the runs' writes to queue up")
        gate.release.set()
        assert await held == "gate"
        return group, list(await asyncio.gather(*writers))

    group, last_indexes = async_to_sync(write)()
    # ... so the three commit in one transaction after it.
    assert (group.writes, group.transactions) == (4, 2)
    for run, _ in pairs:
        assert last_indexes.pop(0) == len(streams[run.pk]) - 1
        sequences = list(run.journal.order_by("index").values_list("source_sequence", flat=True))
        assert sequences == list(range(len(streams[run.pk])))
        positions = list(TimelineEvent.objects.filter(execution=run.execution).values_list("position", flat=True))
        assert positions == list(range(1, len(positions) + 1))


def test_a_run_that_lost_its_lease_fails_alone_and_the_others_in_its_transaction_commit():
    (kept, kept_lease), (lost, lost_lease) = (
        factories.leased_run(run_id="run-kept"),
        factories.leased_run(run_id="run-lost"),
    )
    leases.release(lost_lease, "failed")
    items = {kept.pk: text_deltas(kept, 10), lost.pk: text_deltas(lost, 10)}

    async def write() -> tuple[CommitGroup, list]:
        group = CommitGroup()
        gate = OpenTransaction()
        held = asyncio.ensure_future(group.write(gate))
        await _wait_until(gate.entered.is_set, "the gate's transaction")
        writes = [
            asyncio.ensure_future(group.write(partial(RunProjection(run).record, items[run.pk], lease=lease)))
            for run, lease in ((kept, kept_lease), (lost, lost_lease))
        ]
        await _wait_until(lambda: len(group._waiting) == 2, "both writes to queue up")
        gate.release.set()
        await held
        return group, await asyncio.gather(*writes, return_exceptions=True)

    group, (kept_entries, refused) = async_to_sync(write)()
    assert group.transactions == 2
    assert isinstance(refused, leases.LeaseLost)
    assert [entry.index for entry in kept_entries] == list(range(len(items[kept.pk])))
    assert JournalEntry.objects.filter(run=kept).count() == len(items[kept.pk])
    assert not JournalEntry.objects.filter(run=lost).exists()
    assert not TimelineEvent.objects.filter(run=lost).exists()
    assert TimelineEvent.objects.filter(run=kept).exists()


def test_a_transaction_that_fails_fails_every_write_in_it_and_commits_none():
    first, second = factories.leased_run(run_id="run-first"), factories.leased_run(run_id="run-second")

    class Aborted(BaseException):
        """Not an error of one write: it ends the group's transaction itself."""

    def aborts() -> None:
        raise Aborted

    async def write() -> list:
        group = CommitGroup()
        gate = OpenTransaction()
        held = asyncio.ensure_future(group.write(gate))
        await _wait_until(gate.entered.is_set, "the gate's transaction")
        records = [
            asyncio.ensure_future(group.write(partial(RunProjection(run).record, text_deltas(run, 3), lease=lease)))
            for run, lease in (first, second)
        ]
        aborted = asyncio.ensure_future(group.write(aborts))
        await _wait_until(lambda: len(group._waiting) == 3, "the writes to queue up")
        gate.release.set()
        await held
        return await asyncio.gather(*records, aborted, return_exceptions=True)

    outcomes = async_to_sync(write)()
    assert all(isinstance(outcome, Aborted) for outcome in outcomes)
    assert not JournalEntry.objects.exists() and not TimelineEvent.objects.exists()


WHO = contextvars.ContextVar("who", default="the group")


def test_each_write_runs_in_the_context_of_the_run_that_handed_it_over():
    """A run's publications go through its own sender, found in a context variable: the group's commit must not
    lend them the context of whichever run started the group's task."""

    async def hand_over(group: CommitGroup, name: str) -> str:
        WHO.set(name)
        return await group.write(WHO.get)

    async def write() -> list[str]:
        group = CommitGroup()
        gate = OpenTransaction()
        held = asyncio.ensure_future(group.write(gate))
        await _wait_until(gate.entered.is_set, "the gate's transaction")
        writes = [asyncio.ensure_future(hand_over(group, name)) for name in ("run a", "run b")]
        await _wait_until(lambda: len(group._waiting) == 2, "both writes to queue up")
        gate.release.set()
        await held
        return list(await asyncio.gather(*writes))

    assert async_to_sync(write)() == ["run a", "run b"]
