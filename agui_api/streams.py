"""An execution's stored AG-UI events as server-sent events: replay from a position, then follow until it settles.

The stream follows the execution exactly as a timeline socket does, with an `ExecutionFollower` of the process's
feed of the execution (`runs.services.timeline`): every frame after the cursor once and in order, replay then
live, a gap filled from the database, what a lost message said caught up by the feed's checks. Only the output
differs: SSE records, and an end.

It ends once the execution settled (waiting counts as settled) and every event before that was sent. The
database decides, never a status message alone (one published before a resume can arrive after it): the stream
reads the execution's status, then its last position, when it starts and whenever the feed hands on a settled
status; if the status is settled, the stream ends once it sent that position. Reading the status first means the
position covers every event that led to it. An open stream holds no database connection of its own: the follower
reads where the process's sockets read, and the stream's own reads close theirs.

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
SSE comment saying why; reconnecting gets the endpoint's 401. If following fails (the follower's database read,
the feed's channel layer), the response breaks off: the client sees an error and resumes with `Last-Event-ID`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
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
from runs.protocol import EncodedFrame, ExecutionStatusMessage, TimelineFrame
from runs.services.store.access import visible_executions
from runs.services.timeline import ExecutionFollower, Frames, last_position, session_group

from .answers import interrupt_of
from .auth import Caller

__all__ = ("sse_events",)

log = logging.getLogger(__name__)

KEEPALIVE_SECONDS: Final = 15.0
CREDENTIAL_CHECK_SECONDS: Final = 5.0
# The `type` of `runs.protocol.SessionEnded`, the message logging out sends to the session's group.
SESSION_ENDED: Final = "session.ended"
_EVENT: TypeAdapter[Any] = TypeAdapter(Event)
_ENCODER = EventEncoder()


class FollowingFailed(RuntimeError):
    """The stream's follower stopped (it logged why); the response breaks off."""


@dataclass(frozen=True)
class _Stored:
    """One stored event, decoded into its ag-ui-protocol model."""

    position: int
    run: int
    event: Any


def _settled(status: str | None) -> bool:
    return status is None or status == ExecutionStatus.WAITING or status not in ACTIVE_EXECUTION_STATUSES


class _Outbox:
    """The stream's `FollowerOutput`: what its follower hands on waits here until the stream sends it. Handing on
    waits for nothing, so the feed may hand on at once."""

    def __init__(self) -> None:
        self.frames: list[TimelineFrame] = []
        # A settled status was handed on since the stream last asked the database.
        self.settled = False
        self.session_ended = False
        self.failed = False
        self.changed = asyncio.Event()

    async def send_frames(self, frames: list[EncodedFrame], whole: Frames | None) -> None:
        self.frames += [frame.frame for frame in frames]
        self.changed.set()

    async def send_status(self, message: ExecutionStatusMessage) -> None:
        if _settled(message["status"]):
            self.settled = True
            self.changed.set()

    async def send_ready(self, position: int) -> None:
        """Nothing to send: an SSE stream has no handover from replay to live."""

    async def abort(self) -> None:
        self.failed = True
        self.changed.set()

    def end_session(self) -> None:
        self.session_ended = True
        self.changed.set()

    async def wait(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.changed.wait(), max(seconds, 0.0))


def _settled_end(execution_pk: int) -> int | None:
    """The execution's last position if it is settled, else None."""
    try:
        # The status first: when it says settled, the position read next covers everything that led there.
        status = Execution.objects.filter(pk=execution_pk).values_list("status", flat=True).first()
        return last_position(execution_pk) if _settled(status) else None
    finally:
        connections.close_all()


def _records(frames: list[TimelineFrame]) -> list[str]:
    """The SSE records of the run events among `frames`."""
    try:
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
        return [_encoded(stored, requests) for stored in events]
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


class _SessionWatch:
    """The session's group, to which logging out sends `session.ended`: the stream ends at once."""

    def __init__(self, layer: Any, session_key: str, outbox: _Outbox) -> None:
        self.layer = layer
        self.group = session_group(session_key)
        self.outbox = outbox
        self.channel = ""
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.channel = await self.layer.new_channel()
        await self.layer.group_add(self.group, self.channel)
        self.task = asyncio.create_task(self._receive())

    async def _receive(self) -> None:
        try:
            while (await self.layer.receive(self.channel)).get("type") != SESSION_ENDED:
                pass
        except Exception:
            # The credential check still ends the stream of a session that logged out, a few seconds later.
            log.exception("watching the session of an AG-UI stream failed")
            return
        self.outbox.end_session()

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
        if self.channel:
            await self.layer.group_discard(self.group, self.channel)


async def sse_events(execution_pk: int, after: int, caller: Caller) -> AsyncIterator[str]:
    """The SSE text of the execution's events after `after`, until it settles (waiting counts as settled) or the
    caller's token or session no longer authenticates."""
    outbox = _Outbox()
    follower = ExecutionFollower(execution_pk, outbox)
    layer = get_channel_layer()
    session = _SessionWatch(layer, caller.session_key, outbox) if caller.session_key is not None else None
    try:
        if session is not None:
            await session.start()
        await follower.join()
        follower.follow(after)
        end = await sync_to_async(_settled_end)(execution_pk)
        sent = after
        checked = wrote = time.monotonic()
        while True:
            # No await between the clear and the look at the outbox: whatever comes later sets it again.
            outbox.changed.clear()
            frames, outbox.frames = outbox.frames, []
            settled, outbox.settled = outbox.settled, False
            if outbox.session_ended:
                yield _ended(caller)
                return
            if outbox.failed:
                raise FollowingFailed(f"following execution {execution_pk} failed")
            if time.monotonic() - checked >= CREDENTIAL_CHECK_SECONDS:
                if not await sync_to_async(_still_valid)(caller):
                    yield _ended(caller)
                    return
                if not await sync_to_async(_still_visible)(caller, execution_pk):
                    # The user left the execution's team: as if it no longer existed.
                    yield f": ended: there is no execution {execution_pk}\n\n"
                    return
                checked = time.monotonic()
            if frames:
                records = await sync_to_async(_records)(frames)
                for record in records:
                    yield record
                sent = frames[-1]["position"]
                if records:
                    wrote = time.monotonic()
            if settled and end is None:
                end = await sync_to_async(_settled_end)(execution_pk)
            if end is not None and sent >= end:
                return
            if time.monotonic() - wrote >= KEEPALIVE_SECONDS:
                yield ": keepalive\n\n"
                wrote = time.monotonic()
            await outbox.wait(min(checked + CREDENTIAL_CHECK_SECONDS, wrote + KEEPALIVE_SECONDS) - time.monotonic())
    finally:
        await follower.leave()
        if session is not None:
            await session.stop()


def _still_valid(caller: Caller) -> bool:
    try:
        return caller.still_valid()
    finally:
        connections.close_all()


def _still_visible(caller: Caller, execution_pk: int) -> bool:
    try:
        return caller.within(visible_executions(caller.user)).filter(pk=execution_pk).exists()
    finally:
        connections.close_all()


def _ended(caller: Caller) -> str:
    why = "the API token was revoked or has expired" if caller.by_token else "the login session ended"
    return f": ended: {why}\n\n"
