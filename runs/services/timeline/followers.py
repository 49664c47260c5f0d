"""Live delivery of one execution to one client: every frame after a cursor once and in order, replay then live,
and the execution's statuses, handed to an output that encodes them.

The timeline socket (`observers.consumers`) and the AG-UI event stream (`agui_api.streams`) both follow an
execution with an `ExecutionFollower`; they differ only in their `FollowerOutput` (socket frames, or SSE records
and when to end).

A follower joins the execution's group through the process's feed (`feeds.py`) *before* reading anything: every
event committed from then on is either in the replay or arrives as a live message (published after commit), so
nothing falls in between. It replays the stored frames after its cursor (what the feed remembers, then pages
from the database) while live messages queue, tells the output it is ready, then drains the queue and hands on
live frames, dropping any at or below the last position handed on; a live frame that skips positions is preceded
by the missing frames read from the database. The feed makes sure a status comes after every frame committed
before it.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from typing import Protocol

from channels.db import database_sync_to_async

from runs.protocol import EncodedFrame, ExecutionStatusMessage

from . import read_side
from .feeds import ExecutionFeed, Frames, Offer, encoded, feed_for, merged

__all__ = ("ExecutionFollower", "FollowerOutput")

log = logging.getLogger(__name__)


class FollowerOutput(Protocol):
    """Where a follower hands on what it follows. While the follower is live with nothing queued it calls these in
    the feed's task, so they must wait for nothing but their own client."""

    async def send_frames(self, frames: list[EncodedFrame], whole: Frames | None) -> None:
        """`frames` in position order, the first following the last one sent, none missing. `whole`: what the feed
        offered, when they are all its frames (its encoding can be shared by the feed's viewers)."""

    async def send_status(self, message: ExecutionStatusMessage) -> None:
        """A status the feed offered; every frame committed before it was sent first."""

    async def send_ready(self, position: int) -> None:
        """The replay is sent, up to `position`; live frames follow."""

    async def abort(self) -> None:
        """Following failed: end the socket or stream, so its client reconnects and resumes from its cursor."""


class ExecutionFollower:
    """A viewer of an execution's feed that hands on to one output. `join()`, then `follow(after)`; `leave()`."""

    def __init__(self, execution_pk: int, output: FollowerOutput) -> None:
        self.execution_pk = execution_pk
        self.output = output
        self.feed: ExecutionFeed | None = None
        self.live = False
        # What the feed offered that could not be handed on at once; during the replay it waits here.
        self.queued: list[Offer] = []
        self.posted = asyncio.Event()
        self.last_sent = 0
        # Whoever hands frames on (the replay, the queue's drain, the feed handing on at once) holds this: each
        # advances `last_sent`, and messages go out in the order the feed offered them.
        self.sending = asyncio.Lock()
        self.task: asyncio.Task[None] | None = None

    async def join(self) -> ExecutionFeed:
        """Join the execution's group through this process's feed; do it before reading anything."""
        self.feed = feed = feed_for(self.execution_pk)
        await feed.add(self)
        return feed

    def follow(self, after: int) -> None:
        """Hand on the stored frames after position `after`, then `ready`, then live ones, in a task of its own.

        The task runs in a context of its own: its database reads go where every socket's go, never to the thread
        of the request that opened an AG-UI stream, which would keep a connection for as long as the stream lasts.
        """
        self.last_sent = after
        self.task = asyncio.get_running_loop().create_task(self._replay_then_follow(), context=contextvars.Context())

    async def leave(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
        if self.feed is not None:
            await self.feed.remove(self)

    async def offer(self, message: Offer) -> None:
        # Handed on at once only when nothing is ahead of it and no database read is needed (the common live
        # case); that saves a task wake-up per viewer and message.
        if self.live and not self.queued and not self.sending.locked():
            async with self.sending:
                if not isinstance(message, Frames):
                    await self.output.send_status(message)
                    return
                if (frames := self._following(message.frames)) is not None:
                    await self._send(frames, message if len(frames) == len(message.frames) else None)
                    return
        self.queued.append(message)
        self.posted.set()

    async def drop(self) -> None:
        await self.output.abort()

    async def _replay_then_follow(self) -> None:
        try:
            async with self.sending:
                await self._send_stored_after_cursor()
                await self.output.send_ready(self.last_sent)
                self.live = True
            while True:
                while self.queued:
                    async with self.sending:
                        messages, self.queued = self.queued, []
                        await self._handle(messages)
                # No await between the emptiness check and the clear: a message queued later sets it again.
                self.posted.clear()
                await self.posted.wait()
        except Exception:
            # A task's exception would otherwise vanish and leave the client waiting forever; aborting makes it
            # reconnect and resume from the last frame it got.
            log.exception("following execution %s failed", self.execution_pk)
            await self.output.abort()

    async def _handle(self, messages: list[Offer]) -> None:
        """Consecutive frames go out together; a status after every frame before it."""
        for message in merged(messages):
            if isinstance(message, Frames):
                await self._deliver(message.frames)
            else:
                await self.output.send_status(message)

    def _following(self, frames: list[EncodedFrame]) -> list[EncodedFrame] | None:
        """The frames after the last one sent, if they follow it without a hole (None if they do not)."""
        fresh = sorted((frame for frame in frames if frame.position > self.last_sent), key=lambda f: f.position)
        # Positions are unique: the first following the last sent and the span matching the count means no hole.
        first, last = self.last_sent + 1, self.last_sent + len(fresh)
        if fresh and (fresh[0].position, fresh[-1].position) != (first, last):
            return None
        return fresh

    async def _send_stored_after_cursor(self) -> None:
        if self.feed is not None:
            await self._send(self.feed.remembered_after(self.last_sent))
        while page := await database_sync_to_async(read_side.frames_after)(self.execution_pk, self.last_sent):
            frames = encoded(page)
            if self.feed is not None:
                self.feed.remember(frames)
            await self._send(frames)
            if len(page) < read_side.REPLAY_PAGE_SIZE:
                break

    async def _deliver(self, frames: list[EncodedFrame]) -> None:
        outgoing: list[EncodedFrame] = []
        last = self.last_sent
        for frame in sorted(frames, key=lambda f: f.position):
            position = frame.position
            if position <= last:
                continue
            if position > last + 1:
                missing = await database_sync_to_async(read_side.frames_between)(self.execution_pk, last, position)
                outgoing += encoded(missing)
            outgoing.append(frame)
            last = position
        await self._send(outgoing)

    async def _send(self, frames: list[EncodedFrame], whole: Frames | None = None) -> None:
        if not frames:
            return
        await self.output.send_frames(frames, whole)
        self.last_sent = frames[-1].position
