"""The Host's websockets: the timeline of one execution, thread statuses, and the open approval requests.

`/ws/executions/<pk>/` replays stored AG-UI events from the database, then goes live, with no gap and no
duplicate: it follows the execution as the AG-UI event stream does (`runs.services.timeline.ExecutionFollower`,
through this process's feed of the execution) and sends what it is handed as socket frames: the status first,
the replay as `events`, `ready`, then live `event`/`events` and `status`.
`/ws/threads/` forwards thread statuses; `/ws/approvals/` the open requests whenever they change.

Every message, code and limit is defined in `runs.protocol` and described once in docs/architecture.md
("Websocket protocol").
"""

from __future__ import annotations

import asyncio

from channels.db import database_sync_to_async

from observers.authenticated import AuthenticatedJsonConsumer
from runs.protocol import (
    CLOSE_INTERNAL_ERROR,
    CLOSE_NOT_FOUND,
    ApprovalsChanged,
    ApprovalsFrame,
    ApprovalsSubscribe,
    EncodedFrame,
    ErrorCode,
    ExecutionStatusMessage,
    ReadyFrame,
    StatusFrame,
    ThreadsSubscribe,
    ThreadStatus,
    TimelineSubscribe,
    message_texts,
)
from runs.services.lifecycle import answerable_requests
from runs.services.store import access
from runs.services.timeline import APPROVALS_GROUP, THREADS_GROUP, ExecutionFollower, Frames, read_side
from runs.validators import MAX_DB_INTEGER


def _status_frame(message: ExecutionStatusMessage) -> StatusFrame:
    return StatusFrame(type="status", execution=message["execution"], status=message["status"], runs=message["runs"])


class ExecutionTimelineConsumer(AuthenticatedJsonConsumer[TimelineSubscribe]):
    """The timeline socket: the `FollowerOutput` of an `ExecutionFollower`, which it hands socket frames."""

    client_message = TimelineSubscribe
    field_error_codes = {"after": ErrorCode.BAD_CURSOR}
    expected_shape = '{"type": "subscribe", "after": <position or null>, "execution": <pk, optional>}'

    async def opened(self) -> None:
        self.execution_pk: int = self.scope["url_route"]["kwargs"]["pk"]
        self.follower = ExecutionFollower(self.execution_pk, self)
        self.last_status: StatusFrame | None = None
        if not await self.still_allowed():
            return

    async def still_allowed(self) -> bool:
        # Another team's execution is answered exactly like one that does not exist, now and at every re-check.
        visible = self.execution_pk <= MAX_DB_INTEGER and await database_sync_to_async(self._visible)()
        if not visible:
            await self.fail(
                ErrorCode.NOT_FOUND, f"Execution {self.execution_pk} does not exist.", close_code=CLOSE_NOT_FOUND
            )
        return visible

    def _visible(self) -> bool:
        return access.visible_executions(self.user).filter(pk=self.execution_pk).exists()

    async def disconnect(self, code: int) -> None:
        # Set once the socket opened for a logged-in user.
        if (follower := getattr(self, "follower", None)) is not None:
            await follower.leave()

    async def receive_message(self, message: TimelineSubscribe) -> None:
        if self.follower.feed is not None:
            await self.fail(ErrorCode.ALREADY_SUBSCRIBED, "This connection is already subscribed.")
            return
        if message.execution is not None and message.execution != self.execution_pk:
            await self.fail(
                ErrorCode.CURSOR_EXECUTION_MISMATCH,
                f"The cursor belongs to execution {message.execution}, not {self.execution_pk}.",
            )
            return
        after = message.after or 0
        feed = await self.follower.join()
        # A position the feed saw is committed, so a cursor at or below it needs no look at the end.
        end = (
            feed.seen
            if after <= feed.seen
            else await database_sync_to_async(read_side.last_position)(self.execution_pk)
        )
        if after > end:
            await self.fail(ErrorCode.CURSOR_BEYOND_END, f"Position {after} is beyond the end of the timeline ({end}).")
            return
        await self.send_status(feed.status or await feed.note_status())
        # The replay runs beside the dispatch loop; live messages are queued meanwhile.
        self.follower.follow(after)

    async def send_status(self, message: ExecutionStatusMessage) -> None:
        """A status frame, unless it says what the last one said (the feed offers one after each check that found
        a lost message)."""
        frame = _status_frame(message)
        if frame != self.last_status:
            self.last_status = frame
            await self.send_json(frame)

    async def send_frames(self, frames: list[EncodedFrame], whole: Frames | None) -> None:
        """One frame as an `event` message; several as `events` messages (per-message cost dominates replay). Sent
        whole, the feed's frames go in the messages the first socket made for all (`Frames.texts`)."""
        for text in whole.texts if whole is not None else message_texts(frames):
            await self.send_encoded(text)

    async def send_ready(self, position: int) -> None:
        await self.send_json(ReadyFrame(type="ready", position=position))

    async def abort(self) -> None:
        await self.close(code=CLOSE_INTERNAL_ERROR)


class ThreadListConsumer(AuthenticatedJsonConsumer[ThreadsSubscribe]):
    client_message = ThreadsSubscribe
    expected_shape = '{"type": "subscribe", "threads": [<thread pk>, ...]}'

    async def opened(self) -> None:
        self.threads: list[int] = []
        # The last status sent of each subscribed thread, so a refresh sends only what changed.
        self.shown: dict[int, ThreadStatus] = {}
        # A refresh's read and send, and a live message's send, one at a time: an older status read by a
        # refresh can never overtake a newer live one.
        self.sending = asyncio.Lock()
        # Whether the user may see each thread a message named: the group carries every team's statuses. Read
        # again at each refresh, so a membership that ended stops the statuses of its team's threads.
        self.visible: dict[int, bool] = {}
        await self.join(THREADS_GROUP)

    async def receive_message(self, message: ThreadsSubscribe) -> None:
        self.threads = list(message.threads)
        await self._send_changed_statuses()
        await self.send_json(ReadyFrame(type="ready"))

    async def refresh(self) -> None:
        self.visible = {}
        await self._send_changed_statuses()

    async def _send_changed_statuses(self) -> None:
        async with self.sending:
            for status in await database_sync_to_async(self._visible_statuses)():
                if self.shown.get(status["thread"]) != status:
                    await self._send_status(status)

    def _visible_statuses(self) -> list[ThreadStatus]:
        visible = access.visible_threads(self.user).filter(pk__in=self.threads)
        return read_side.thread_status_messages(visible.values_list("pk", flat=True))

    async def thread_status(self, message: ThreadStatus) -> None:
        async with self.sending:
            thread = message["thread"]
            if thread not in self.visible:
                self.visible[thread] = await database_sync_to_async(self._may_see)(thread)
            if self.visible[thread]:
                await self._send_status(message)

    def _may_see(self, thread: int) -> bool:
        return access.visible_threads(self.user).filter(pk=thread).exists()

    async def _send_status(self, status: ThreadStatus) -> None:
        if status["thread"] in self.threads:
            self.shown[status["thread"]] = status
        await self.send_json(status)


class ApprovalsConsumer(AuthenticatedJsonConsumer[ApprovalsSubscribe]):
    """The open requests of every thread, for the nav badge and the inbox of any page.

    A group message only says that something changed; the consumer reads the committed set itself, so the
    last message it handles always leaves the page with the current set, whatever order messages came in.
    Each refresh reads again, which covers a message lost on the way.
    """

    client_message = ApprovalsSubscribe
    expected_shape = '{"type": "subscribe"}'
    shown: list[int] | None = None
    subscribed = False

    async def opened(self) -> None:
        # One read and send at a time: a set read earlier can never be sent after one read later.
        self.sending = asyncio.Lock()
        # Joined before the first read, so a change committed in between is not missed.
        await self.join(APPROVALS_GROUP)

    async def receive_message(self, message: ApprovalsSubscribe) -> None:
        if self.subscribed:
            await self.fail(ErrorCode.ALREADY_SUBSCRIBED, "This connection is already subscribed.")
            return
        self.subscribed = True
        await self._send_if_changed()

    async def refresh(self) -> None:
        await self._send_if_changed()

    async def approvals_changed(self, message: ApprovalsChanged) -> None:
        await self._send_if_changed()

    def _decidable_ids(self) -> list[int]:
        """The open requests the user may decide, as the badge and the inbox count them."""
        return list(answerable_requests(self.user).values_list("pk", flat=True))

    async def _send_if_changed(self) -> None:
        if not self.subscribed:
            return
        async with self.sending:
            requests = await database_sync_to_async(self._decidable_ids)()
            if requests == self.shown:
                return
            self.shown = requests
            await self.send_json(ApprovalsFrame(type="approvals", count=len(requests), requests=requests))
