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

A stream lasts only as long as the credentials that opened it. Every `CREDENTIAL_CHECK_SECONDS` it checks again that
its token (not revoked, not expired) or session still authenticates its user (a read or two by key), and that
the user may still see the execution (a member of its team); a session's
stream also joins the session's group, to which logging out sends `session.ended` (observers' `user_logged_out`
receiver, the one that closes the session's websockets), and ends at once. An ended stream's last record is an
SSE comment saying why; reconnecting gets the endpoint's 401.
"""

from __future__ import annotations

import asyncio
import time
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
from runs.services.store.access import visible_executions
from runs.services.timeline import REPLAY_PAGE_SIZE, execution_group, frames_after, session_group

from .answers import interrupt_of
from .auth import Caller

__all__ = ("sse_events",)

WAKE_SECONDS: Final = 1.0
KEEPALIVE_SECONDS: Final = 15.0
CREDENTIAL_CHECK_SECONDS: Final = 5.0
# The `type` of `runs.protocol.SessionEnded`, the message logging out sends to the session's group.
SESSION_ENDED: Final = "session.ended"
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
            if f["origin"] == TimelineOrigin.RUN.value
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


async def sse_events(execution_pk: int, after: int, caller: Caller) -> AsyncIterator[str]:
    """The SSE text of the execution's events after `after`, until it settles (waiting counts as settled) or the
    caller's token or session no longer authenticates."""
    layer = get_channel_layer()
    channel = await layer.new_channel() if layer is not None else None
    groups = [execution_group(execution_pk)]
    if caller.session_key is not None:
        groups.append(session_group(caller.session_key))
    if layer is not None and channel is not None:
        for group in groups:
            await layer.group_add(group, channel)
    try:
        idle = 0.0
        checked = time.monotonic()
        while True:
            if time.monotonic() - checked >= CREDENTIAL_CHECK_SECONDS:
                if not await sync_to_async(_still_valid)(caller):
                    yield _ended(caller)
                    return
                if not await sync_to_async(_still_visible)(caller, execution_pk):
                    # The user left the execution's team: as if it no longer existed.
                    yield f": ended: there is no execution {execution_pk}\n\n"
                    return
                checked = time.monotonic()
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
            message = await _woken(layer, channel)
            if message is not None and message.get("type") == SESSION_ENDED:
                yield _ended(caller)
                return
            if message is not None:
                idle = 0.0
                continue
            idle += WAKE_SECONDS
            if idle >= KEEPALIVE_SECONDS:
                idle = 0.0
                yield ": keepalive\n\n"
    finally:
        if layer is not None and channel is not None:
            for group in groups:
                await layer.group_discard(group, channel)


def _still_valid(caller: Caller) -> bool:
    try:
        return caller.still_valid()
    finally:
        connections.close_all()


def _still_visible(caller: Caller, execution_pk: int) -> bool:
    try:
        return visible_executions(caller.user).filter(pk=execution_pk).exists()
    finally:
        connections.close_all()


def _ended(caller: Caller) -> str:
    why = "the API token was revoked or has expired" if caller.by_token else "the login session ended"
    return f": ended: {why}\n\n"


async def _woken(layer: Any, channel: str | None) -> dict[str, Any] | None:
    """The next message to the stream's groups; None after `WAKE_SECONDS` without one."""
    if channel is None:
        await asyncio.sleep(WAKE_SECONDS)
        return None
    try:
        return await asyncio.wait_for(layer.receive(channel), WAKE_SECONDS)
    except TimeoutError:
        return None
