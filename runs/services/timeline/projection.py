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

__all__ = ("RunProjection", "dump_event", "store_events")

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


class RunProjection:
    """One run's observer and the writer of its journal and timeline rows.

    The lease holder is the only writer of its run's journal and, while it holds the lease, of its
    execution's timeline, so the projection keeps the journal cursor and the next position itself instead
    of reading them back for every batch (the lease check in each transaction fences a stale writer, and
    the unique constraints stay the backstop). Both are read once, on the first write.
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
        # Built on the first write (it reads the run's policy version, which the worker does off its loop).
        self._redactor: TimelineRedactor | None = None

    def record(
        self, items: Sequence[HarnessStreamEvent[Any]], *, lease: Lease, state_checkpointed: bool = False
    ) -> list[journal.Appended]:
        """Journal the items and store their projection in one transaction (lease checked first).

        `state_checkpointed` is passed on to `journal.append`.

        If the transaction fails the worker stops using this projection: the observer has already seen
        the items and only a rebuild from the journal (`resume()`) matches the database again. The same
        holds when the caller wraps `record` in a transaction of its own that later rolls back.
        """
        try:
            with transaction.atomic():
                if self._cursor is None:
                    self._cursor = journal.cursor_of(self.run)
                batch = journal.append(
                    self.run, items, lease=lease, cursor=self._cursor, state_checkpointed=state_checkpointed
                )
                last_position = self._store(list(zip(batch.entries, items, strict=True)))
        except BaseException:
            self._cursor = self._last_position = None
            raise
        self._cursor, self._last_position = batch.cursor, last_position
        return batch.entries

    def store(self, pairs: Sequence[tuple[journal.Appended | None, HarnessStreamEvent[Any]]]) -> None:
        """Inside a transaction: observe each item and write the events at the execution's next positions.

        A pair without a journal entry is an item the Host itself supplies to close a lane (recovery).
        """
        self._store(pairs)

    def _store(self, pairs: Sequence[tuple[journal.Appended | None, HarnessStreamEvent[Any]]]) -> int:
        produced = [
            Produced(None if entry is None else entry.pk, item.occurred_at, event, fragment_id(item, position))
            for entry, item in pairs
            for position, event in enumerate(self.observer.observe(item))
        ]
        if self._redactor is None:
            self._redactor = TimelineRedactor.for_version(self.run.policy_version)
        return store_events(self.run, produced, after=self._last_position, redactor=self._redactor)


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
        last = TimelineEvent.objects.filter(execution_id=run.execution_id).order_by("-position")
        after = last.values_list("position", flat=True).first() or 0
    rows = []
    frames: list[TimelineFrame] = []
    run_id = run.run_id or ""
    for position, (entry_pk, occurred_at, dumped) in enumerate(redactor.events(produced), start=after + 1):
        text = encode_event(dumped)
        subagent_run_id = dumped.get("subagentRunId", "")
        event_type = dumped["type"]
        rows.append(
            (
                run.execution_id,
                position,
                run.pk,
                entry_pk,
                subagent_run_id,
                origin,
                event_type,
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
    insert_rows(TimelineEvent, _FIELDS, rows)
    publish_frames(run.execution_id, frames)
    return after + len(rows)
