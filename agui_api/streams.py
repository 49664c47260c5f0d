"""An execution's stored AG-UI events as server-sent events: replay from a position, then follow until it settles.

The database is the only source: every read takes the events after the last position sent, so nothing is
skipped or sent twice however replay and live overlap. The execution's Channels group (the one the websocket
uses) only wakes the stream early; a lost message costs at most `WAKE_SECONDS`. Each read opens and closes
its own database connection, so an open stream holds none while it waits.

The events are the stored, redacted ones, with the timeline position as the SSE `id` (so `Last-Event-ID`
resumes), encoded by `ag_ui.encoder`. Two things differ from the timeline: an interrupt outcome carries each
request's message, answer schema and expiry (the Host knows them, the projection does not), and the Host's own
items (origin `host`: the `a13n.host.decision` item after an interrupt) are left out, because they are not
events of any run's AG-UI stream (a decision follows the suspended run's RUN_FINISHED).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Final

from ag_ui.core import Event, RunFinishedEvent, RunFinishedInterruptOutcome
from ag_ui.encoder import EventEncoder
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.db import connections
from pydantic import TypeAdapter

from runs.models import ACTIVE_EXECUTION_STATUSES, DeferredRequest, Execution, ExecutionStatus, TimelineOrigin
from runs.services.timeline import REPLAY_PAGE_SIZE, execution_group, frames_after

from .answers import interrupt_of

__all__ = ("sse_events",)

WAKE_SECONDS: Final = 1.0
KEEPALIVE_SECONDS: Final = 15.0
_EVENT: TypeAdapter[Any] = TypeAdapter(Event)
_ENCODER = EventEncoder()


@dataclass(frozen=True)
class _Stored:
    """One stored event, decoded into its ag-ui-protocol model."""

    position: int
    run: int
    event: Any


@dataclass(frozen=True)
class _Page:
    events: list[_Stored]
    last: int
    settled: bool
    full: bool
    requests: dict[tuple[int, str], DeferredRequest]


def _settled(status: str | None) -> bool:
    return status is None or status == ExecutionStatus.WAITING or status not in ACTIVE_EXECUTION_STATUSES


def _read(execution_pk: int, after: int) -> _Page:
    try:
        # The status first: when it says settled, the events read next include everything that led there.
        status = Execution.objects.filter(pk=execution_pk).values_list("status", flat=True).first()
        frames = frames_after(execution_pk, after)
        events = [
            _Stored(f["position"], f["run"], _EVENT.validate_json(f["event_json"]))
            for f in frames
            if f["origin"] == TimelineOrigin.RUN
        ]
        interrupted = {
            stored.run
            for stored in events
            if isinstance(stored.event, RunFinishedEvent)
            and isinstance(stored.event.outcome, RunFinishedInterruptOutcome)
        }
        requests = {
            (request.run_id, request.tool_call_id): request
            # The policy version masks what `interrupt_of` says about a request's arguments.
            for request in DeferredRequest.objects.filter(run_id__in=interrupted).select_related(
                "execution__policy_version"
            )
        }
        last = frames[-1]["position"] if frames else after
        return _Page(events, last, _settled(status), len(frames) == REPLAY_PAGE_SIZE, requests)
    finally:
        connections.close_all()


def _encoded(stored: _Stored, requests: dict[tuple[int, str], DeferredRequest]) -> str:
    event = stored.event
    if isinstance(event, RunFinishedEvent) and isinstance(event.outcome, RunFinishedInterruptOutcome):
        enriched = [
            interrupt_of(request, interrupt) if (request := requests.get((stored.run, interrupt.id))) else interrupt
            for interrupt in event.outcome.interrupts
        ]
        event = event.model_copy(update={"outcome": event.outcome.model_copy(update={"interrupts": enriched})})
    return f"id: {stored.position}\n{_ENCODER.encode(event)}"


async def sse_events(execution_pk: int, after: int) -> AsyncIterator[str]:
    """The SSE text of the execution's events after `after`, until it settles (waiting counts as settled)."""
    layer = get_channel_layer()
    channel = await layer.new_channel() if layer is not None else None
    if channel is not None:
        await layer.group_add(execution_group(execution_pk), channel)
    try:
        idle = 0.0
        while True:
            page = await sync_to_async(_read)(execution_pk, after)
            for stored in page.events:
                yield _encoded(stored, page.requests)
            if page.last != after:
                after = page.last
                idle = 0.0
            if page.full:
                continue
            if page.settled:
                return
            if await _woken(layer, channel):
                idle = 0.0
                continue
            idle += WAKE_SECONDS
            if idle >= KEEPALIVE_SECONDS:
                idle = 0.0
                yield ": keepalive\n\n"
    finally:
        if channel is not None:
            await layer.group_discard(execution_group(execution_pk), channel)


async def _woken(layer: Any, channel: str | None) -> bool:
    """Wait for a message to the execution's group; False after `WAKE_SECONDS` without one."""
    if channel is None:
        await asyncio.sleep(WAKE_SECONDS)
        return False
    try:
        await asyncio.wait_for(layer.receive(channel), WAKE_SECONDS)
    except TimeoutError:
        return False
    return True
