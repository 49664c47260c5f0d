"""The source journal: every item of a run's root stream, in order, exactly once.

This is the Host side of observer replay: items are kept as structured `HarnessStreamEvent`s
(through the versioned codec), appended only by the lease holder, in root-stream order with a contiguous
`index`, and with a contiguous `sequence` per source run id (the root run and each inline child run count
from 0). A batch with a gap or a repeated sequence is refused whole. `read_prefix` gives the exact finite prefix
of one run as an async iterable of decoded items.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import sync_to_async
from django.db import transaction

from runs.harness import HarnessState, HarnessStreamEvent, decode_item, encode_item
from runs.models import Checkpoint, CheckpointKind, Execution, JournalEntry, Run

from . import checkpoints
from .inserts import insert_rows
from .leases import Lease, verify

__all__ = (
    "Appended",
    "AppendedBatch",
    "JournalCursor",
    "JournalError",
    "JournalRows",
    "append",
    "cursor_of",
    "decoded",
    "encode",
    "insert",
    "read_prefix",
)

# Rows read per query by `read_prefix`.
PAGE_SIZE = 2000
_FIELDS = ("run", "index", "source_run_id", "source_sequence", "kind", "occurred_at", "payload", "codec_version")


class JournalError(ValueError):
    """An append that would break the journal's order (a gap, a repeat) or that names another thread."""


@dataclass(frozen=True, slots=True)
class JournalCursor:
    """Where a run's journal stands: the last index, the last sequence of each source run, the thread.

    The run's single writer (the lease holder) keeps the cursor each append returns and passes it to the
    next one instead of having it read back from the table; every item is still checked against it.
    """

    thread_id: str
    last_index: int = -1
    last_sequence: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Appended:
    """One stored journal row: its primary key and its index in the run's journal."""

    pk: int
    index: int


@dataclass(frozen=True, slots=True)
class AppendedBatch:
    """The rows one `append` stored, in order, and the cursor after them."""

    entries: list[Appended]
    cursor: JournalCursor


def cursor_of(run: Run, sources: Sequence[str] | None = None) -> JournalCursor:
    """The cursor of a run as stored (for `sources`, or every source run id when `None`)."""
    entries = JournalEntry.objects.filter(run=run)
    last_index = entries.order_by("-index").values_list("index", flat=True).first()
    if sources is None:
        sources = list(entries.values_list("source_run_id", flat=True).distinct().order_by())
    last_sequence = {}
    for source in sources:
        # One index seek per source (unique run, source_run_id, source_sequence), not a scan of the run.
        last = (
            entries.filter(source_run_id=source).order_by("-source_sequence").values_list("source_sequence", flat=True)
        ).first()
        if last is not None:
            last_sequence[source] = last
    return JournalCursor(_thread_id(run), -1 if last_index is None else last_index, last_sequence)


def _thread_id(run: Run) -> str:
    # The worker loads a run with its execution and thread: one query less for each run it starts.
    if Run.execution.is_cached(run) and Execution.thread.is_cached(run.execution):
        return run.execution.thread.thread_id
    return Run.objects.filter(pk=run.pk).values_list("execution__thread__thread_id", flat=True).get()


@dataclass(frozen=True, slots=True)
class JournalRows:
    """Items encoded and checked against a cursor, not stored yet: what `insert` writes, and the cursor after it."""

    rows: list[tuple[Any, ...]]
    cursor: JournalCursor

    @classmethod
    def joined(cls, parts: Sequence[JournalRows]) -> JournalRows:
        """Consecutive parts (each encoded after the one before) as one."""
        return cls([row for part in parts for row in part.rows], parts[-1].cursor)


def encode(
    run: Run, items: Sequence[HarnessStreamEvent[Any]], *, cursor: JournalCursor, state_checkpointed: bool = False
) -> JournalRows:
    """The rows of `items` after `cursor`, checked for order and thread; reads nothing from the database.

    With `state_checkpointed` a result item's state is left out of its row: the caller records it, in the
    transaction that inserts the row, as the checkpoint at that row's index.
    """
    for item in items:
        if item.run_id == run.run_id and item.thread_id != cursor.thread_id:
            raise JournalError(f"journal of run {run.run_id} refused an item of thread {item.thread_id}")
    last_sequence = dict(cursor.last_sequence)
    rows = []
    index = cursor.last_index
    for item in items:
        entry = encode_item(item, state_checkpointed=state_checkpointed)
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
            (
                run.pk,
                index,
                entry.source_run_id,
                entry.source_sequence,
                entry.kind,
                item.occurred_at,
                entry.payload,
                entry.codec_version,
            )
        )
    return JournalRows(rows, JournalCursor(cursor.thread_id, index, last_sequence))


def insert(journal_rows: JournalRows, *, lease: Lease) -> list[Appended]:
    """Inside a transaction: check the lease, then store the rows; their primary keys, in order."""
    verify(lease, "append to the journal")
    rows = journal_rows.rows
    if not rows:
        return []
    # RETURNING gives no order guarantee on every backend: rows are matched by their index.
    stored = {row_index: pk for pk, row_index in insert_rows(JournalEntry, _FIELDS, rows, returning=("id", "index"))}
    return [Appended(stored[row[1]], row[1]) for row in rows]


def append(
    run: Run,
    items: Sequence[HarnessStreamEvent[Any]],
    *,
    lease: Lease,
    cursor: JournalCursor | None = None,
    state_checkpointed: bool = False,
) -> AppendedBatch:
    """Append items in one transaction, after checking the lease, order and encoding; all or nothing.

    With `cursor` (the one the previous append returned to this run's writer) nothing is read back from
    the table; without it, the run's current cursor is read first. The returned cursor is valid once the
    caller's transaction commits. `state_checkpointed` is `encode`'s.
    """
    if not items:
        return AppendedBatch([], cursor if cursor is not None else cursor_of(run))
    with transaction.atomic():
        if cursor is None:
            cursor = cursor_of(run, list({item.run_id for item in items}))
        rows = encode(run, items, cursor=cursor, state_checkpointed=state_checkpointed)
        return AppendedBatch(insert(rows, lease=lease), rows.cursor)


def decoded(entry: JournalEntry) -> HarnessStreamEvent[Any]:
    return _decode(entry.run_id, entry.index, entry.payload, entry.codec_version)


def _decode(run_pk: int, index: int, payload: str, codec_version: int) -> HarnessStreamEvent[Any]:
    return decode_item(payload, codec_version, checkpointed_state=lambda: _result_state(run_pk, index))


def _result_state(run_pk: int, index: int) -> HarnessState:
    """The state of the result at `index`: the terminal or failure-candidate checkpoint recorded with it."""
    checkpoint = (
        Checkpoint.objects.filter(
            run_id=run_pk, journal_index=index, kind__in=(CheckpointKind.TERMINAL, CheckpointKind.FAILURE_CANDIDATE)
        )
        .order_by("-pk")
        .first()
    )
    if checkpoint is None:
        raise JournalError(f"the result at index {index} of run {run_pk} refers to a checkpoint that does not exist")
    return checkpoints.load(checkpoint)


def _page(run_pk: int, after: int, through: int | None) -> list[tuple[int, str, int]]:
    # Only the columns a reader needs, as tuples: model instances (and their datetime parsing) cost more
    # than the decoding itself.
    entries = JournalEntry.objects.filter(run_id=run_pk, index__gt=after).order_by("index")
    if through is not None:
        entries = entries.filter(index__lte=through)
    return list(entries.values_list("index", "payload", "codec_version")[:PAGE_SIZE])


def _decoded_page(run_pk: int, after: int, through: int | None) -> list[tuple[int, HarnessStreamEvent[Any]]]:
    # Decoded here, in the database thread: a result may need its checkpoint read.
    return [
        (index, _decode(run_pk, index, payload, codec_version))
        for index, payload, codec_version in _page(run_pk, after, through)
    ]


async def read_prefix(run: Run, *, through: int | None = None) -> AsyncIterator[HarnessStreamEvent[Any]]:
    """The run's items from the first through index `through` (inclusive; all committed ones if `None`)."""
    after = -1
    while True:
        page = await sync_to_async(_decoded_page)(run.pk, after, through)
        for index, item in page:
            if index != after + 1:
                raise JournalError(f"journal of run {run.pk} has a gap before index {index}")
            yield item
            after = index
        if len(page) < PAGE_SIZE:
            return
