"""The projection writer: journal items to durable AG-UI timeline events.

The worker's `HarnessAguiStreamObserver` converts each committed-to-be journal item, and the produced events
are stored as `TimelineEvent`s with the next contiguous positions of the execution — in the same transaction
as the journal rows, so the timeline never shows an item the journal lacks or the other way round. Positions
are the Host's durable event ids (S11g), independent of harness sequences, and shared by all runs of an
execution so their lanes interleave in one ordered timeline. Publication happens after commit.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ag_ui.core import BaseEvent
from django.db import transaction
from django.db.models import Max

from observers.agui import HarnessAguiStreamObserver
from runs.harness.events import HarnessStreamEvent
from runs.models import JournalEntry, Run, TimelineEvent

from . import journal
from .leases import Lease
from .publishing import publish_timeline

__all__ = ("RunProjection", "dump_event", "store_events")


def dump_event(event: BaseEvent) -> dict[str, Any]:
    """The standard AG-UI JSON encoding of an event (by alias, without unset optional fields)."""
    return event.model_dump(mode="json", by_alias=True, exclude_none=True)


class RunProjection:
    """One run's observer and the writer of its timeline rows."""

    def __init__(self, run: Run, observer: HarnessAguiStreamObserver | None = None) -> None:
        self.run = run
        # The worker never reads the observer's snapshot; positions and rows live in the database.
        self.observer = observer or HarnessAguiStreamObserver(retain_events=False)

    def record(self, items: Sequence[HarnessStreamEvent[Any]], *, lease: Lease) -> list[JournalEntry]:
        """Journal the items and store their projection in one transaction (lease checked first).

        If the transaction fails the worker stops using this projection: the observer has already seen
        the items and only a rebuild from the journal (`resume()`) matches the database again.
        """
        with transaction.atomic():
            entries = journal.append(self.run, items, lease=lease)
            self.store([(entry, item) for entry, item in zip(entries, items, strict=True)])
        return entries

    def store(self, pairs: Sequence[tuple[JournalEntry | None, HarnessStreamEvent[Any]]]) -> list[TimelineEvent]:
        """Inside a transaction: observe each item and write the events at the next positions.

        A pair without a journal entry is an item the Host itself supplies to close a lane (recovery).
        """
        produced = [(entry, item.occurred_at, event) for entry, item in pairs for event in self.observer.observe(item)]
        return store_events(self.run, produced)


def store_events(run: Run, produced: Sequence[tuple[JournalEntry | None, datetime, BaseEvent]]) -> list[TimelineEvent]:
    """Inside a transaction: store AG-UI events of `run` at its execution's next positions, publish after commit."""
    last = TimelineEvent.objects.filter(execution_id=run.execution_id).aggregate(last=Max("position"))["last"] or 0
    rows = []
    for position, (entry, occurred_at, event) in enumerate(produced, start=last + 1):
        dumped = dump_event(event)
        rows.append(
            TimelineEvent(
                execution_id=run.execution_id,
                position=position,
                run=run,
                journal_entry=entry,
                subagent_run_id=dumped.get("subagentRunId", ""),
                event_type=dumped["type"],
                event=dumped,
                occurred_at=occurred_at,
            )
        )
    created = TimelineEvent.objects.bulk_create(rows)
    publish_timeline(run.execution_id, created)
    return created
