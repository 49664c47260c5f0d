"""One channel-layer subscription per web process and execution, handed to each of its viewers: the followers of
the timeline sockets and of the AG-UI event streams (`followers.py`).

Channels would deliver a group message to every socket of the group on its own: a layer receive, a task wake-up,
a dispatch and a write per socket, in the order the messages came. With a thousand viewers of a live run one
daphne fell seconds behind (BENCHMARKS.md, viewers). A feed receives the execution group's messages once per
process and offers each one to every viewer in turn: a viewer that is live with nothing queued writes it at once,
in the feed's task; one that is still replaying, or has something queued, queues it and drains its queue in its
own task, so one that fell behind sends what piled up as one message.

What the database must be asked is asked here once for all the viewers of the process, not once per viewer:
- Before offering a status, the feed reads the frames committed after the highest position it saw and offers
  them first. A status follows the commits before it, so a viewer that gets it has every event before it even
  when a timeline message was lost on the way (pub/sub delivers at most once).
- Every `HARNESS_SOCKET_REFRESH_SECONDS` the feed joins its group again (a restarted Redis forgets groups) and
  compares the execution's status and last position with what it saw; if a message was lost, it offers what
  that message said. Without this a feed whose last message was lost would leave its viewers silent.
- It remembers the execution's frames from position 1 on, as far as it saw them without a hole (replay pages its
  viewers read, live frames), up to `CACHE_CHARS` of text: stored frames never change, and a thousand viewers
  replaying the same timeline otherwise read it from the database a thousand times. A viewer still asks the
  database for everything after what the feed remembers, so nothing committed is missed.

`feed_for(execution_pk)` returns the process's feed of an execution, creating it; `await feed.add(viewer)`
returns once the feed is in the group, so a viewer that reads the database after it misses nothing committed
later. A feed belongs to the process, not to the viewer that created it: its tasks run in a context of their own,
so an AG-UI request's thread context (Django gives each request one, and it ends with the request) never carries
over to the sockets it serves afterwards.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol, TypeGuard, cast

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings

from runs.protocol import (
    EncodedFrame,
    ExecutionStatusMessage,
    GroupMessage,
    TimelineAppend,
    TimelineFrame,
    message_texts,
)

from . import read_side
from .publishing import execution_group

__all__ = ("ExecutionFeed", "Frames", "Offer", "Viewer", "encoded", "feed_for", "merged")

log = logging.getLogger(__name__)

CACHE_CHARS = 16 * 2**20


def encoded(frames: Iterable[TimelineFrame]) -> list[EncodedFrame]:
    """The frames, each to be encoded once, when it is first sent or remembered."""
    return [EncodedFrame(frame) for frame in frames]


@dataclass(frozen=True, eq=False)
class Frames:
    """Frames the feed offers its viewers in one go (a `timeline.append`, or what it read after a lost message).

    The same object goes to every viewer of the process, so what a socket sends is made once for them all: each
    frame's text, and `texts`, the socket messages that carry them all, by the first socket that sends them whole.
    """

    frames: list[EncodedFrame]

    @functools.cached_property
    def texts(self) -> list[str]:
        return message_texts(self.frames)


Offer = Frames | ExecutionStatusMessage
"""What a feed offers its viewers."""


class Viewer(Protocol):
    """What the feed offers messages to; `followers.ExecutionFollower` is the one the Host uses."""

    async def offer(self, message: Offer) -> None:
        """Take frames or an execution status: hand them on now, or queue them if something is ahead of them.
        Called in the feed's task; must wait for nothing but its own client."""

    async def drop(self) -> None:
        """End the viewer's socket or stream, so its client reconnects and resumes from its cursor."""


def _status_and_end(execution_pk: int) -> tuple[ExecutionStatusMessage, int]:
    # The status first: the events it follows are committed with it or before it, so the position read after
    # covers them all; read the other way round, a status could announce an end whose events it missed.
    status = read_side.execution_status_snapshot(execution_pk)
    return status, read_side.last_position(execution_pk)


class ExecutionFeed:
    def __init__(self, execution_pk: int) -> None:
        self.execution_pk = execution_pk
        self.group = execution_group(execution_pk)
        self.key = (asyncio.get_running_loop(), execution_pk)
        layer = get_channel_layer()
        assert layer is not None, "the settings configure a channel layer"
        self.layer = layer
        self.viewers: dict[Viewer, None] = {}
        self.channel = ""
        self.started = asyncio.ensure_future(self._start())
        self.tasks: list[asyncio.Task[None]] = []
        # Frames at positions 1..len(remembered), each with its text.
        self.remembered: list[EncodedFrame] = []
        self.remembered_chars = 0
        # The highest position of any frame the feed saw, and the last status it offered: what the database is
        # compared with to find lost messages.
        self.seen = 0
        self.status: ExecutionStatusMessage | None = None
        # A status and the frames read before it are offered as one step, never interleaved with another.
        self.announcing = asyncio.Lock()
        # Messages received and not offered yet.
        self.arrived: list[GroupMessage] = []
        self.has_arrived = asyncio.Event()

    async def _start(self) -> None:
        try:
            self.channel = await self.layer.new_channel()
            await self.layer.group_add(self.group, self.channel)
        except BaseException:
            self._forget()
            raise
        if _feeds.get(self.key) is not self:
            # Every viewer left while the feed was joining.
            await self.layer.group_discard(self.group, self.channel)
            return
        self.tasks = [
            asyncio.create_task(self._receive(), name=f"feed-{self.group}"),
            asyncio.create_task(self._fan_out(), name=f"feed-out-{self.group}"),
            asyncio.create_task(self._check(), name=f"feed-check-{self.group}"),
        ]

    def _forget(self) -> None:
        """Viewers that come later get a new feed."""
        if _feeds.get(self.key) is self:
            del _feeds[self.key]

    async def add(self, viewer: Viewer) -> None:
        self.viewers[viewer] = None
        try:
            await asyncio.shield(self.started)
        except BaseException:
            await self.remove(viewer)
            raise

    async def remove(self, viewer: Viewer) -> None:
        self.viewers.pop(viewer, None)
        if self.viewers:
            return
        self._forget()
        for task in self.tasks:
            task.cancel()
        if self.started.done() and not self.started.cancelled() and self.started.exception() is None:
            await self.layer.group_discard(self.group, self.channel)

    async def note_status(self) -> ExecutionStatusMessage:
        """The execution's status read now, kept as the feed's if it has none yet.

        Viewers that come later start from the feed's status instead of each reading it: any status committed
        after reaches them as a message (or through the next check if its message was lost).
        """
        status = await database_sync_to_async(read_side.execution_status_snapshot)(self.execution_pk)
        # A status message received during the read is newer than what was read.
        if self.status is None:
            self.status = status
        return status

    def remembered_after(self, position: int) -> list[EncodedFrame]:
        return self.remembered[position:]

    def remember(self, frames: list[EncodedFrame]) -> None:
        """Note `frames` (in position order) as seen, and keep them if they continue what is remembered."""
        for frame in frames:
            self.seen = max(self.seen, frame.position)
            if frame.position != len(self.remembered) + 1 or self.remembered_chars > CACHE_CHARS:
                continue
            self.remembered.append(frame)
            self.remembered_chars += len(frame.text)

    async def _offer(self, message: Offer) -> None:
        for viewer in list(self.viewers):
            try:
                await viewer.offer(message)
            except Exception:
                # One socket's failure must not stop the feed of every other viewer.
                log.exception("a viewer of %s could not take a message", self.group)
                await viewer.drop()

    async def _announce(self, status: ExecutionStatusMessage) -> None:
        """Offer the frames committed after the highest position seen, then `status`."""
        while page := await database_sync_to_async(read_side.frames_after)(self.execution_pk, self.seen):
            frames = encoded(page)
            self.remember(frames)
            await self._offer(Frames(frames))
            if len(page) < read_side.REPLAY_PAGE_SIZE:
                break
        self.status = status
        await self._offer(status)

    async def _receive(self) -> None:
        """Take each message off the layer as it comes; `_fan_out` offers them."""
        try:
            while True:
                # Received first, appended after: `_fan_out` replaces the list while this waits.
                message = await self.layer.receive(self.channel)
                # Only `runs.services.timeline.publishing` sends to the group; `_fan_out_one` survives a malformed one.
                self.arrived.append(cast(GroupMessage, message))
                self.has_arrived.set()
        except Exception:
            log.exception("the feed of %s stopped", self.group)
            await self._fail()

    async def _fan_out(self) -> None:
        """Offer what arrived; consecutive timeline messages that piled up meanwhile go out as one.

        Offering one message to a thousand viewers takes a while, and more arrive meanwhile; were each offered on
        its own, every viewer would get a write per message and the feed would fall further behind with each.
        """
        try:
            while True:
                await self.has_arrived.wait()
                # No await between the clear and the take: a message that arrives later sets it again.
                self.has_arrived.clear()
                messages, self.arrived = self.arrived, []
                offers = [_offer_of(message) for message in messages]
                for offer in merged([offer for offer in offers if offer is not None]):
                    await self._fan_out_one(offer)
        except Exception:
            log.exception("the feed of %s stopped", self.group)
            await self._fail()

    async def _fan_out_one(self, offer: Offer) -> None:
        if not isinstance(offer, Frames):
            async with self.announcing:
                await self._announce(offer)
            return
        try:
            self.remember(offer.frames)
        except (KeyError, TypeError):
            # A malformed message must not stop the feed of every viewer; a later message or the next check
            # brings what it should have.
            log.exception("a timeline message of %s is malformed", self.group)
            return
        await self._offer(offer)

    async def _check(self) -> None:
        try:
            while True:
                await asyncio.sleep(settings.HARNESS_SOCKET_REFRESH_SECONDS)
                await self.layer.group_add(self.group, self.channel)
                async with self.announcing:
                    status, end = await database_sync_to_async(_status_and_end)(self.execution_pk)
                    if end > self.seen or status != self.status:
                        await self._announce(status)
        except Exception:
            log.exception("checking the feed of %s failed", self.group)
            await self._fail()

    async def _fail(self) -> None:
        """Stop receiving and close every viewer; their pages reconnect to a new feed."""
        self._forget()
        for task in self.tasks:
            if task is not asyncio.current_task():
                task.cancel()
        for viewer in list(self.viewers):
            await viewer.drop()


def _is_append(message: GroupMessage) -> TypeGuard[TimelineAppend]:
    return message.get("type") == "timeline.append" and isinstance(message.get("frames"), list)


def _is_status(message: GroupMessage) -> TypeGuard[ExecutionStatusMessage]:
    return message.get("type") == "execution.status"


def _offer_of(message: GroupMessage) -> Offer | None:
    """A group message as the feed offers it (None: one the feed has nothing to offer for)."""
    if _is_status(message):
        return message
    if _is_append(message):
        return Frames(encoded(message["frames"]))
    return None


def merged(offers: list[Offer]) -> list[Offer]:
    """`offers` in order, each run of consecutive frames as one."""
    runs: list[Offer] = []
    for offer in offers:
        previous = runs[-1] if runs else None
        if isinstance(offer, Frames) and isinstance(previous, Frames):
            runs[-1] = Frames(previous.frames + offer.frames)
        else:
            runs.append(offer)
    return runs


_feeds: dict[tuple[asyncio.AbstractEventLoop, int], ExecutionFeed] = {}


def feed_for(execution_pk: int) -> ExecutionFeed:
    """This event loop's feed of the execution (a web process runs one loop)."""
    feed = _feeds.get((asyncio.get_running_loop(), execution_pk))
    if feed is None:
        # In a context of its own: its tasks must not carry the context of the viewer that happened to come first.
        feed = contextvars.Context().run(ExecutionFeed, execution_pk)
        _feeds[feed.key] = feed
    return feed
