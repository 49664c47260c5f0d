"""The Host's websockets: the timeline of one execution, thread statuses, and the open approval requests.

`/ws/executions/<pk>/` replays stored AG-UI events from the database, then goes live, with no gap and no
duplicate: it joins the execution's group *before* reading the database, keeps live frames in a buffer while
it replays, sends `ready`, then flushes the buffer and forwards live frames, dropping any at or below the last
position sent; a live frame that skips positions is preceded by the missing frames read from the database.
`/ws/threads/` forwards thread statuses; `/ws/approvals/` the open requests whenever they change.

Every message, code and limit is defined in `runs.protocol` and described once in docs/architecture.md
("Websocket protocol").
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from channels.db import database_sync_to_async
from django.conf import settings

from observers.authenticated import AuthenticatedJsonConsumer
from runs.protocol import (
    CLOSE_INTERNAL_ERROR,
    CLOSE_NOT_FOUND,
    PIECE_CHARS,
    ApprovalsChanged,
    ApprovalsFrame,
    ApprovalsSubscribe,
    ErrorCode,
    ExecutionStatusMessage,
    ReadyFrame,
    StatusFrame,
    ThreadsSubscribe,
    ThreadStatus,
    TimelineAppend,
    TimelineFrame,
    TimelineSubscribe,
    event_frame_text,
)
from runs.services import read_side
from runs.services.approvals import open_request_ids
from runs.services.publishing import APPROVALS_GROUP, THREADS_GROUP, execution_group
from runs.validators import MAX_DB_INTEGER

log = logging.getLogger(__name__)


_EVENTS_MESSAGE = '{{"type":"events","events":[{}]}}'


def _fitting(texts: list[str], limit: int) -> list[list[str]]:
    """Consecutive runs of `texts` whose joined length stays within `limit` (a longer text goes alone)."""
    groups: list[list[str]] = [[]]
    size = 0
    for text in texts:
        if groups[-1] and size + len(text) + 1 > limit:
            groups.append([])
            size = 0
        groups[-1].append(text)
        size += len(text) + 1
    return groups


def _status_frame(message: ExecutionStatusMessage) -> StatusFrame:
    return StatusFrame(type="status", execution=message["execution"], status=message["status"], runs=message["runs"])


class ExecutionTimelineConsumer(AuthenticatedJsonConsumer):
    client_message = TimelineSubscribe
    field_error_codes = {"after": ErrorCode.BAD_CURSOR}
    expected_shape = '{"type": "subscribe", "after": <position or null>, "execution": <pk, optional>}'

    async def opened(self) -> None:
        self.execution_pk: int = self.scope["url_route"]["kwargs"]["pk"]
        self.group = execution_group(self.execution_pk)
        self.subscribed = False
        self.live = False
        self.pending: list[TimelineFrame] = []
        self.last_sent = 0
        self.last_status: StatusFrame | None = None
        self.deferred_status: ExecutionStatusMessage | None = None
        # Catch-ups from the database and deliveries of live frames both advance `last_sent`; one at a time.
        self.sending = asyncio.Lock()
        self.replay: asyncio.Task | None = None
        exists = self.execution_pk <= MAX_DB_INTEGER and await database_sync_to_async(read_side.execution_exists)(
            self.execution_pk
        )
        if not exists:
            await self.fail(
                ErrorCode.NOT_FOUND, f"Execution {self.execution_pk} does not exist.", close_code=CLOSE_NOT_FOUND
            )

    async def disconnect(self, code: int) -> None:
        if getattr(self, "replay", None) is not None:
            self.replay.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.replay
        if getattr(self, "subscribed", False):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive_message(self, message: TimelineSubscribe) -> None:
        if self.subscribed:
            await self.fail(ErrorCode.ALREADY_SUBSCRIBED, "This connection is already subscribed.")
            return
        if message.execution is not None and message.execution != self.execution_pk:
            await self.fail(
                ErrorCode.CURSOR_EXECUTION_MISMATCH,
                f"The cursor belongs to execution {message.execution}, not {self.execution_pk}.",
            )
            return
        after = message.after or 0
        # Join the group before reading anything: every event committed from here on is either in the
        # replay or arrives as a live message (published after commit), so nothing falls in between.
        await self.channel_layer.group_add(self.group, self.channel_name)
        self.subscribed = True
        end = await database_sync_to_async(read_side.last_position)(self.execution_pk)
        if after > end:
            await self.fail(ErrorCode.CURSOR_BEYOND_END, f"Position {after} is beyond the end of the timeline ({end}).")
            return
        self.last_sent = after
        await self._send_status(await database_sync_to_async(read_side.execution_status_snapshot)(self.execution_pk))
        # The replay runs beside the dispatch loop so live messages keep arriving (into `pending`) meanwhile,
        # instead of piling up in the channel layer, whose per-channel capacity is small.
        self.replay = asyncio.create_task(self._replay_then_live())

    async def _replay_then_live(self) -> None:
        try:
            await self._replay()
            while True:
                await asyncio.sleep(settings.HARNESS_SOCKET_REFRESH_SECONDS)
                await self._refresh()
        except Exception:
            # A task's exception would otherwise vanish and leave the client waiting forever; closing makes it
            # reconnect and resume from the last frame it got.
            log.exception("timeline socket of execution %s failed", self.execution_pk)
            await self.close(code=CLOSE_INTERNAL_ERROR)

    async def _refresh(self) -> None:
        """Join the group again and catch up: a restarted Redis forgot the membership and the messages in flight."""
        await self.channel_layer.group_add(self.group, self.channel_name)
        # The status is read before the catch-up: the events a status follows are committed with it or before
        # it, so the catch-up has them all; read after, a status could announce an end whose events it missed.
        snapshot = await database_sync_to_async(read_side.execution_status_snapshot)(self.execution_pk)
        await self._send_stored_after_cursor()
        if _status_frame(snapshot) != self.last_status:
            await self._send_status(snapshot)

    async def _replay(self) -> None:
        await self._send_stored_after_cursor()
        await self.send_json(ReadyFrame(type="ready", position=self.last_sent))
        while self.pending:
            frames, self.pending = self.pending, []
            await self._deliver(frames)
        # No await between the emptiness check above and this switch: nothing can slip past the buffer.
        self.live = True
        if self.deferred_status is not None:
            message, self.deferred_status = self.deferred_status, None
            await self.execution_status(message)

    async def _send_stored_after_cursor(self) -> None:
        async with self.sending:
            while page := await database_sync_to_async(read_side.frames_after)(self.execution_pk, self.last_sent):
                await self._send_frames(page)
                if len(page) < read_side.REPLAY_PAGE_SIZE:
                    break

    async def _send_status(self, message: ExecutionStatusMessage) -> None:
        self.last_status = _status_frame(message)
        await self.send_json(self.last_status)

    async def timeline_append(self, message: TimelineAppend) -> None:
        if not self.live:
            self.pending.extend(message["frames"])
            return
        await self._deliver(message["frames"])

    async def execution_status(self, message: ExecutionStatusMessage) -> None:
        if not self.live:
            # A status change follows the commits before it, so it is sent once the replay and the buffered
            # frames are out: a viewer that sees "completed" after `ready` has every event before it.
            self.deferred_status = message
            return
        # If the layer dropped the last timeline message (no later frame would reveal the gap), catch up from
        # the database before reporting the status.
        await self._send_stored_after_cursor()
        await self._send_status(message)

    async def _deliver(self, frames: list[TimelineFrame]) -> None:
        async with self.sending:
            outgoing: list[TimelineFrame] = []
            last = self.last_sent
            for frame in sorted(frames, key=lambda f: f["position"]):
                position = frame["position"]
                if position <= last:
                    continue
                if position > last + 1:
                    outgoing += await database_sync_to_async(read_side.frames_between)(
                        self.execution_pk, last, position
                    )
                outgoing.append(frame)
                last = position
            await self._send_frames(outgoing)

    async def _send_frames(self, frames: list[TimelineFrame]) -> None:
        """One frame as an `event` message; several as `events` messages (per-message cost dominates replay)."""
        if not frames:
            return
        # The events' stored JSON text is spliced in as it is (`event_frame_text`), never decoded; one message
        # holds as many frames as fit in a piece, so a long replay is not cut into pieces and rejoined.
        texts = [event_frame_text(frame) for frame in frames]
        if len(texts) == 1:
            await self.send_encoded(texts[0])
        else:
            for group in _fitting(texts, PIECE_CHARS - len(_EVENTS_MESSAGE) + 2):
                await self.send_encoded(_EVENTS_MESSAGE.format(",".join(group)))
        self.last_sent = frames[-1]["position"]


class ThreadListConsumer(AuthenticatedJsonConsumer):
    client_message = ThreadsSubscribe
    expected_shape = '{"type": "subscribe", "threads": [<thread pk>, ...]}'

    async def opened(self) -> None:
        await self.channel_layer.group_add(THREADS_GROUP, self.channel_name)
        self.joined = True

    async def disconnect(self, code: int) -> None:
        if getattr(self, "joined", False):
            await self.channel_layer.group_discard(THREADS_GROUP, self.channel_name)

    async def receive_message(self, message: ThreadsSubscribe) -> None:
        for status in await database_sync_to_async(read_side.thread_status_messages)(list(message.threads)):
            await self.send_json(status)
        await self.send_json(ReadyFrame(type="ready"))

    async def thread_status(self, message: ThreadStatus) -> None:
        await self.send_json(message)


class ApprovalsConsumer(AuthenticatedJsonConsumer):
    """The open requests of every thread, for the nav badge and the inbox of any page.

    A group message only says that something changed; the consumer reads the committed set itself, so the
    last message it handles always leaves the page with the current set, whatever order messages came in.
    Every `HARNESS_SOCKET_REFRESH_SECONDS` it rejoins the group and reads again, which covers a message lost to a
    Redis restart (the restarted Redis also forgot the membership).
    """

    client_message = ApprovalsSubscribe
    expected_shape = '{"type": "subscribe"}'
    shown: list[int] | None = None
    refresher: asyncio.Task | None = None

    async def opened(self) -> None:
        # Joined before the first read, so a change committed in between is not missed.
        await self.channel_layer.group_add(APPROVALS_GROUP, self.channel_name)
        self.joined = True

    async def disconnect(self, code: int) -> None:
        if self.refresher is not None:
            self.refresher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.refresher
        if getattr(self, "joined", False):
            await self.channel_layer.group_discard(APPROVALS_GROUP, self.channel_name)

    async def receive_message(self, message: ApprovalsSubscribe) -> None:
        if self.refresher is not None:
            await self.fail(ErrorCode.ALREADY_SUBSCRIBED, "This connection is already subscribed.")
            return
        self.refresher = asyncio.create_task(self._send_then_refresh())

    async def _send_then_refresh(self) -> None:
        try:
            while True:
                await self._send_if_changed()
                await asyncio.sleep(settings.HARNESS_SOCKET_REFRESH_SECONDS)
                await self.channel_layer.group_add(APPROVALS_GROUP, self.channel_name)
        except Exception:
            log.exception("approvals socket failed")
            await self.close(code=CLOSE_INTERNAL_ERROR)

    async def approvals_changed(self, message: ApprovalsChanged) -> None:
        if self.refresher is not None:
            await self._send_if_changed()

    async def _send_if_changed(self) -> None:
        requests = await database_sync_to_async(open_request_ids)()
        if requests == self.shown:
            return
        self.shown = requests
        await self.send_json(ApprovalsFrame(type="approvals", count=len(requests), requests=requests))
