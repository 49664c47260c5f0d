"""Ending a run's lane when its stream cannot: what a failed run's observer would have ended it with.

The run's observer is given the terminal item a failed run would have had, so the lane ends with the events the
observer itself produces (open messages ended, inline children failed, then RUN_ERROR), stored without a journal
entry since the harness never produced that item. The worker does this when its stream broke off, with the
observer that projected the run (`OpenLane` notes what the items it wrote say about ending the lane); the recovery
sweep does it for a dead worker's run, with a fresh observer rebuilt by `resume()` over the run's journal prefix.
Either way the lane ends alike, since the live observer saw exactly the journaled items.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from ag_ui.core import RunErrorEvent
from asgiref.sync import async_to_sync, sync_to_async
from django.db import transaction
from django.utils import timezone

from observers.agui import HarnessAguiStreamObserver
from runs.harness import (
    HarnessEvent,
    HarnessExtensionEvent,
    HarnessRunResult,
    HarnessRunResultEvent,
    HarnessStreamEvent,
    InlineDelegationPayload,
    SafeFailure,
)
from runs.models import JournalEntry, Run, TimelineEvent

from ..store import journal
from .projection import RunProjection, store_events
from .redaction import Produced

__all__ = ("TERMINAL_EVENTS", "WORKER_LOST", "OpenLane", "aclose_projection", "close_projection", "lane_closed")

log = logging.getLogger(__name__)

WORKER_LOST = "worker_lost"
TERMINAL_EVENTS = ("RUN_FINISHED", "RUN_ERROR")


def lane_closed(run: Run) -> bool:
    """Whether the run's own lane (not an inline child's) has its terminal event."""
    return TimelineEvent.objects.filter(run=run, subagent_run_id="", event_type__in=TERMINAL_EVENTS).exists()


@dataclass
class OpenLane:
    """A run's lane as far as its items were projected: the observer that projected them, and what they say about
    ending the lane (each source run's thread and last sequence, the inline children still open).

    The worker notes each item it writes; `replayed` rebuilds one from the journal. It matches the database only
    while every item noted was committed.
    """

    run: Run
    observer: HarnessAguiStreamObserver
    threads: dict[str, str] = field(default_factory=dict)
    last_sequence: dict[str, int] = field(default_factory=dict)
    open_children: dict[str, InlineDelegationPayload] = field(default_factory=dict)

    @classmethod
    async def replayed(cls, run: Run) -> OpenLane:
        """A fresh observer resumed over the run's journal prefix; `ValueError` if the prefix cannot be replayed."""
        lane = cls(run, HarnessAguiStreamObserver(retain_events=False, fragment=False))
        await lane.observer.resume(lane._noting(journal.read_prefix(run)))
        return lane

    async def _noting(self, items: AsyncIterator[HarnessStreamEvent[Any]]) -> AsyncIterator[HarnessStreamEvent[Any]]:
        async for item in items:
            self.note(item)
            yield item

    def note(self, item: HarnessStreamEvent[Any]) -> None:
        self.threads[item.run_id] = item.thread_id
        self.last_sequence[item.run_id] = item.sequence
        event = getattr(item, "event", None)
        if isinstance(event, HarnessExtensionEvent) and event.payload_type == "inline_delegation":
            delegation = InlineDelegationPayload.model_validate(event.payload)
            if delegation.child_run_id and delegation.action == "started":
                self.open_children[delegation.child_run_id] = delegation
            elif delegation.child_run_id:
                self.open_children.pop(delegation.child_run_id, None)

    def _next(self, run_id: str) -> int:
        self.last_sequence[run_id] = self.last_sequence.get(run_id, -1) + 1
        return self.last_sequence[run_id]

    def closing_items(self, failure: SafeFailure) -> list[HarnessStreamEvent[Any]]:
        """The items a failed run would have ended with: open children failed, innermost first, then the result."""
        now = timezone.now()
        items: list[HarnessStreamEvent[Any]] = []
        root = self.run.run_id
        assert root is not None, "a run that journaled items has its run id"
        for delegation in reversed(list(self.open_children.values())):
            failed = delegation.model_copy(update={"action": "failed", "status": failure.code})
            parent = delegation.parent_run_id
            thread_id = self.threads.get(parent, self.threads[root])
            items.append(HarnessEvent(thread_id, parent, self._next(parent), now, failed.to_event()))
        thread_id = self.threads[root]
        result: HarnessRunResult[Any] = HarnessRunResult(
            thread_id=thread_id, run_id=root, status="failed", failure=failure
        )
        items.append(HarnessRunResultEvent(thread_id, root, self._next(root), now, result))
        return items


def close_projection(run: Run, failure: SafeFailure | None = None) -> bool:
    """`aclose_projection` for sync callers (the recovery sweep), always from the journal."""
    return async_to_sync(aclose_projection)(run, failure)


async def aclose_projection(run: Run, failure: SafeFailure | None = None, lane: OpenLane | None = None) -> bool:
    """End a dead run's lane with what its observer gives for a failed run; False if it already ended.

    `lane` is the worker's own when it matches the database (nothing it noted failed to commit): it saves
    replaying the journal prefix. `failure` defaults to the worker having been lost.
    """
    if not await sync_to_async(_unended)(run):
        return False
    failure = failure or SafeFailure(
        code=WORKER_LOST,
        message="The worker running this run stopped; a recovery run continues the execution.",
        retry_hint="new_run",
    )
    closing: list[HarnessStreamEvent[Any]] = []
    try:
        if lane is None:
            lane = await OpenLane.replayed(run)
        closing = lane.closing_items(failure)
    except ValueError:
        # An undecodable or inconsistent prefix still gets an end, so its execution can go on to recovery.
        log.exception("run %s: journal prefix cannot be replayed; closing its lane with a plain RUN_ERROR", run.pk)
        lane = None
    return await sync_to_async(_store_end)(run, failure, None if lane is None else lane.observer, closing)


def _unended(run: Run) -> bool:
    """Whether the run journaled items of its own and its lane has no end yet."""
    if lane_closed(run) or not JournalEntry.objects.filter(run=run, source_run_id=run.run_id).exists():
        return False
    # The run's own terminal item is journaled; its projection already ended the lane.
    return not JournalEntry.objects.filter(run=run, source_run_id=run.run_id, kind__startswith="result.").exists()


def _store_end(
    run: Run,
    failure: SafeFailure,
    observer: HarnessAguiStreamObserver | None,
    closing: list[HarnessStreamEvent[Any]],
) -> bool:
    with transaction.atomic():
        # Another sweeper holding the row is closing this lane right now: leave it to that one.
        locked = Run.objects.select_for_update(skip_locked=True).filter(pk=run.pk).first()
        if locked is None or lane_closed(locked):
            return False
        if observer is None:
            plain = RunErrorEvent(message=failure.message, code=failure.code)
            store_events(run, [Produced(None, timezone.now(), plain)])
        else:
            RunProjection(run, observer).store([(None, item) for item in closing])
    return True
