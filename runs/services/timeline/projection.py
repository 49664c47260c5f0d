"""The projection writer: journal items to durable AG-UI timeline events.

The worker's `HarnessAguiStreamObserver` converts each committed-to-be journal item, and the produced events
are stored as `TimelineEvent`s with the next contiguous positions of the execution — in the same transaction
as the journal rows, so the timeline never shows an item the journal lacks or the other way round. Positions
are the Host's durable event ids, independent of harness sequences, and shared by all runs of an
execution so their lanes interleave in one ordered timeline. Publication happens after commit.

The observer gives oversized CUSTOM events whole (`fragment=False`): the redactor masks each one whole and only
then cuts it into the fragments the observer would have made, so an event is cut once. Each event's JSON text is
produced once (`runs.protocol.encode_event`): the same text is stored in the row, carried by the published frame
(`event_json`) and read back as text by a replay, so no step decodes and encodes it again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from django.db import transaction

from observers.agui import HarnessAguiStreamObserver, fragment_id
from runs.harness import HarnessStreamEvent
from runs.models import Run, TimelineEvent, TimelineOrigin
from runs.protocol import Origin, TimelineFrame, encode_event, timeline_frame

from ..store import journal
from ..store.inserts import EncodedJson, insert_rows
from ..store.leases import Lease
from .publishing import publish_frames
from .redaction import Produced, TimelineRedactor, dump_event

__all__ = ("PreparedWrite", "RunProjection", "dump_event", "store_events")

_FIELDS = (
    "execution",
    "position",
    "run",
    "journal_entry",
    "subagent_run_id",
    "origin",
    "event_type",
    "event",
    "occurred_at",
)


@dataclass(frozen=True, slots=True)
class PreparedWrite:
    """A batch of a run's items turned into journal and timeline rows and frames, without the database.

    The timeline rows name their journal entry by its index until `RunProjection.write` knows the entries' keys.
    """

    journal: journal.JournalRows
    timeline: list[tuple[Any, ...]]
    frames: list[TimelineFrame]

    @property
    def size(self) -> int:
        """How many items it holds."""
        return len(self.journal.rows)

    @classmethod
    def joined(cls, parts: Sequence[PreparedWrite]) -> PreparedWrite:
        """Consecutive parts (each prepared after the one before) as one write."""
        return cls(
            journal.JournalRows.joined([part.journal for part in parts]),
            [row for part in parts for row in part.timeline],
            [frame for part in parts for frame in part.frames],
        )


class RunProjection:
    """One run's observer and the writer of its journal and timeline rows.

    The lease holder is the only writer of its run's journal and, while it holds the lease, of its
    execution's timeline, so the projection keeps the journal cursor and the next position itself instead
    of reading them back for every batch (the lease check in each transaction fences a stale writer, and
    the unique constraints stay the backstop). Both are read once, by `load`.

    A write has two halves. `prepare` does the CPU work (encoding, observing, masking, the rows and frames)
    and reads nothing; `write` checks the lease and inserts, in one transaction. The worker prepares on its
    event loop and writes on its database thread: with the GIL, Python work in that thread would not run beside
    the loop anyway, and every time the loop released the GIL (each poll of its selector) the two threads would
    trade it, about two context switches per streamed item. The database thread is left with what releases the
    GIL: the driver's calls.
    """

    def __init__(self, run: Run, observer: HarnessAguiStreamObserver | None = None) -> None:
        """`observer` (a fresh one by default) must give oversized CUSTOM events whole (`fragment=False`)."""
        if observer is not None and observer.fragment:
            raise ValueError("the projection cuts CUSTOM events after masking: its observer needs fragment=False")
        self.run = run
        # The worker never reads the observer's snapshot; positions and rows live in the database.
        self.observer = observer or HarnessAguiStreamObserver(retain_events=False, fragment=False)
        self._cursor: journal.JournalCursor | None = None
        self._last_position: int | None = None
        self._redactor: TimelineRedactor | None = None

    @property
    def loaded(self) -> bool:
        return self._cursor is not None and self._last_position is not None and self._redactor is not None

    def load(self) -> None:
        """Read the journal cursor, the execution's last position and the run's masking rules (what is not read yet)."""
        if self._cursor is None:
            self._cursor = journal.cursor_of(self.run)
        if self._last_position is None:
            self._last_position = _last_position(self.run)
        if self._redactor is None:
            self._redactor = TimelineRedactor.for_version(self.run.policy_version)

    def prepare(self, items: Sequence[HarnessStreamEvent[Any]], *, state_checkpointed: bool = False) -> PreparedWrite:
        """The rows and frames of `items`, after those prepared before; reads nothing (call `load` first).

        `state_checkpointed` is `journal.encode`'s. Items the journal refuses are refused before the observer sees
        them; after a refusal, or a failed `write`, the projection reads its cursor and position again on `load`.
        """
        assert self._cursor is not None and self._last_position is not None and self._redactor is not None, "load"
        try:
            rows = journal.encode(self.run, items, cursor=self._cursor, state_checkpointed=state_checkpointed)
        except BaseException:
            self._forget()
            raise
        produced = [
            Produced(row[1], item.occurred_at, event, fragment_id(item, position))
            for row, item in zip(rows.rows, items, strict=True)
            for position, event in enumerate(self.observer.observe(item))
        ]
        timeline, frames = _timeline_rows(self.run, produced, self._last_position, self._redactor, TimelineOrigin.RUN)
        self._cursor = rows.cursor
        self._last_position += len(timeline)
        return PreparedWrite(rows, timeline, frames)

    def write(self, prepared: PreparedWrite, *, lease: Lease) -> list[journal.Appended]:
        """Check the lease and store a prepared batch in one transaction; publish its frames after commit.

        If the transaction fails the worker stops using this projection: the observer has already seen the
        items and only a rebuild from the journal (`resume()`) matches the database again. The same holds when
        the caller wraps `write` in a transaction of its own that later rolls back.
        """
        try:
            with transaction.atomic():
                entries = journal.insert(prepared.journal, lease=lease)
                keys = {entry.index: entry.pk for entry in entries}
                insert_rows(TimelineEvent, _FIELDS, [_with_entry_key(row, keys) for row in prepared.timeline])
                publish_frames(self.run.execution_id, prepared.frames)
        except BaseException:
            self._forget()
            raise
        return entries

    def record(
        self, items: Sequence[HarnessStreamEvent[Any]], *, lease: Lease, state_checkpointed: bool = False
    ) -> list[journal.Appended]:
        """`load`, `prepare` and `write` in one go, for a caller already off the event loop."""
        self.load()
        return self.write(self.prepare(items, state_checkpointed=state_checkpointed), lease=lease)

    def store(self, pairs: Sequence[tuple[journal.Appended | None, HarnessStreamEvent[Any]]]) -> None:
        """Inside a transaction: observe each item and write the events at the execution's next positions.

        A pair without a journal entry is an item the Host itself supplies to close a lane (recovery).
        """
        produced = [
            Produced(None if entry is None else entry.pk, item.occurred_at, event, fragment_id(item, position))
            for entry, item in pairs
            for position, event in enumerate(self.observer.observe(item))
        ]
        if self._redactor is None:
            self._redactor = TimelineRedactor.for_version(self.run.policy_version)
        self._last_position = store_events(self.run, produced, after=self._last_position, redactor=self._redactor)

    def _forget(self) -> None:
        self._cursor = self._last_position = None


def store_events(
    run: Run,
    produced: Sequence[Produced],
    *,
    after: int | None = None,
    redactor: TimelineRedactor | None = None,
    origin: TimelineOrigin = TimelineOrigin.RUN,
) -> int:
    """Inside a transaction: store AG-UI events (with their journal entry pk) of `run` at its execution's next
    positions, after `after` (read from the table when `None`); publish after commit. Returns the last position.

    Every event is masked by the run's policy version on its way in (`redactor` carries the state of a run's
    streamed deltas; a fresh one is built when none is given): this is the only way into the timeline. A CUSTOM
    event comes whole, and one too large to go whole is stored as fragments after masking.
    `origin` HOST marks items the Host adds beside the run's own AG-UI stream (a decision).
    """
    if redactor is None:
        redactor = TimelineRedactor.for_version(run.policy_version)
    if after is None:
        after = _last_position(run)
    rows, frames = _timeline_rows(run, produced, after, redactor, origin)
    insert_rows(TimelineEvent, _FIELDS, rows)
    publish_frames(run.execution_id, frames)
    return after + len(rows)


def _last_position(run: Run) -> int:
    last = TimelineEvent.objects.filter(execution_id=run.execution_id).order_by("-position")
    return last.values_list("position", flat=True).first() or 0


def _timeline_rows(
    run: Run, produced: Sequence[Produced], after: int, redactor: TimelineRedactor, origin: TimelineOrigin
) -> tuple[list[tuple[Any, ...]], list[TimelineFrame]]:
    rows = []
    frames: list[TimelineFrame] = []
    run_id = run.run_id or ""
    for position, (entry, occurred_at, dumped) in enumerate(redactor.events(produced), start=after + 1):
        text = encode_event(dumped)
        subagent_run_id = dumped.get("subagentRunId", "")
        rows.append(
            (
                run.execution_id,
                position,
                run.pk,
                entry,
                subagent_run_id,
                origin,
                dumped["type"],
                EncodedJson(text),
                occurred_at,
            )
        )
        frames.append(
            timeline_frame(
                position=position,
                run=run.pk,
                run_id=run_id,
                run_number=run.number,
                subagent_run_id=subagent_run_id,
                origin=cast(Origin, origin.value),  # TimelineOrigin's values are the protocol's origins
                event_json=text,
            )
        )
    return rows, frames


_ENTRY = _FIELDS.index("journal_entry")


def _with_entry_key(row: tuple[Any, ...], keys: dict[int, int]) -> tuple[Any, ...]:
    # A prepared row names its journal entry by index; the column holds the entry's key.
    return (*row[:_ENTRY], keys[row[_ENTRY]], *row[_ENTRY + 1 :])
