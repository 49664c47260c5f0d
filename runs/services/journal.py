"""The source journal: every item of a run's root stream, in order, exactly once.

This is the Host side of the replay contract (S6–S11): items are kept as structured `HarnessStreamEvent`s
(through the versioned codec), appended only by the lease holder, in root-stream order with a contiguous
`index`, and with a contiguous `sequence` per source run id (the root run and each inline child run count
from 0). A batch with a gap or a repeated sequence is refused whole. `read_prefix` and `tail` give the exact
finite prefix and the live rest of one run as async iterables of decoded items.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

from asgiref.sync import sync_to_async
from django.db import transaction
from django.db.models import Max

from runs.harness.events import HarnessRunResultEvent, HarnessStreamEvent
from runs.models import JournalEntry, Run, RunStatus

from .codec import decode_item, encode_item
from .leases import Lease, verify

__all__ = ("JournalError", "append", "decoded", "read_prefix", "tail")

_PAGE = 200
_FINISHED = (RunStatus.COMPLETED, RunStatus.SUSPENDED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.ABANDONED)


class JournalError(ValueError):
    """An append that would break the journal's order (a gap, a repeat) or that names another thread."""


def append(run: Run, items: Sequence[HarnessStreamEvent[Any]], *, lease: Lease) -> list[JournalEntry]:
    """Append items in one transaction, after checking the lease, order and encoding; all or nothing."""
    if not items:
        return []
    with transaction.atomic():
        verify(lease, "append to the journal")
        encoded = [encode_item(item) for item in items]
        last_index = JournalEntry.objects.filter(run=run).aggregate(last=Max("index"))["last"]
        source_ids = {entry.source_run_id for entry in encoded}
        last_sequence: dict[str, int] = {
            row["source_run_id"]: row["last"]
            for row in JournalEntry.objects.filter(run=run, source_run_id__in=source_ids)
            .values("source_run_id")
            .annotate(last=Max("source_sequence"))
        }
        thread_id = run.execution.thread.thread_id
        for item in items:
            if item.run_id == run.run_id and item.thread_id != thread_id:
                raise JournalError(f"journal of run {run.run_id} refused an item of thread {item.thread_id}")
        rows = []
        index = -1 if last_index is None else last_index
        for item, entry in zip(items, encoded, strict=True):
            expected = last_sequence.get(entry.source_run_id, -1) + 1
            if entry.source_sequence < expected:
                raise JournalError(
                    f"journal duplicate in run {run.pk}: source {entry.source_run_id} sequence "
                    f"{entry.source_sequence} is already recorded (next is {expected})"
                )
            if entry.source_sequence > expected:
                raise JournalError(
                    f"journal gap in run {run.pk}: source {entry.source_run_id} expected sequence {expected}, "
                    f"got {entry.source_sequence}"
                )
            last_sequence[entry.source_run_id] = entry.source_sequence
            index += 1
            rows.append(
                JournalEntry(
                    run=run,
                    index=index,
                    source_run_id=entry.source_run_id,
                    source_sequence=entry.source_sequence,
                    kind=entry.kind,
                    occurred_at=item.occurred_at,
                    payload=entry.payload,
                    codec_version=entry.codec_version,
                )
            )
        return JournalEntry.objects.bulk_create(rows)


def decoded(entry: JournalEntry) -> HarnessStreamEvent[Any]:
    return decode_item(entry.payload, entry.codec_version)


def _page(run_pk: int, after: int, through: int | None) -> list[JournalEntry]:
    entries = JournalEntry.objects.filter(run_id=run_pk, index__gt=after).order_by("index")
    if through is not None:
        entries = entries.filter(index__lte=through)
    return list(entries[:_PAGE])


async def read_prefix(run: Run, *, through: int | None = None) -> AsyncIterator[HarnessStreamEvent[Any]]:
    """The run's items from the first through index `through` (inclusive; all committed ones if `None`)."""
    after = -1
    while True:
        page = await sync_to_async(_page)(run.pk, after, through)
        for entry in page:
            if entry.index != after + 1:
                raise JournalError(f"journal of run {run.pk} has a gap before index {entry.index}")
            yield decoded(entry)
            after = entry.index
        if len(page) < _PAGE:
            return


def _run_finished(run_pk: int) -> bool:
    return Run.objects.filter(pk=run_pk, status__in=_FINISHED).exists()


async def tail(run: Run, *, after: int = -1, poll_seconds: float = 0.2) -> AsyncIterator[HarnessStreamEvent[Any]]:
    """The run's items after index `after`, following new commits, until its terminal item or its end."""
    while True:
        page = await sync_to_async(_page)(run.pk, after, None)
        for entry in page:
            if entry.index != after + 1:
                raise JournalError(f"journal of run {run.pk} has a gap before index {entry.index}")
            item = decoded(entry)
            yield item
            after = entry.index
            if isinstance(item, HarnessRunResultEvent) and item.run_id == run.run_id:
                return
        if not page:
            # Read once more after seeing the run finished: its last items may have committed just before.
            if await sync_to_async(_run_finished)(run.pk):
                if not await sync_to_async(_page)(run.pk, after, None):
                    return
                continue
            await asyncio.sleep(poll_seconds)
