"""One channel-layer subscription per web process and execution, handed to each of its timeline sockets.

Channels would deliver a group message to every socket of the group on its own: a layer receive, a task wake-up,
a dispatch and a write per socket, in the order the messages came. With a thousand viewers of a live run one
daphne fell seconds behind (BENCHMARKS.md, viewers). A feed receives the execution group's messages once per
process, and posts every message to each viewer's own outbox without waiting.
A viewer drains its outbox when it gets to run, so one that fell behind sends what piled up as one message
instead of queueing a write per published batch.

A feed also remembers the execution's frames from position 1 on, as far as it saw them without a hole (replay
pages its viewers read, live frames), up to `CACHE_CHARS` of text: stored frames never change, and a thousand
viewers replaying the same timeline otherwise read it from the database a thousand times. A viewer still asks
the database for everything after what the feed remembers, so nothing committed is missed.

`feed_for(group)` returns the process's feed of a group, creating it; `await feed.add(viewer)` returns once the
feed is in the group, so a viewer that reads the database after it misses nothing committed later.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from channels.layers import get_channel_layer

from runs.protocol import GroupMessage, TimelineFrame, event_frame_text

__all__ = ("ExecutionFeed", "Viewer", "feed_for", "text_of")

log = logging.getLogger(__name__)

CACHE_CHARS = 16 * 2**20


def text_of(frame: TimelineFrame) -> str:
    """A frame's `event` message text, kept on the frame (`text`, never sent itself): the frames of a message the
    feed received are the same objects for all its viewers, so the first one to send a frame encodes it."""
    text = frame.get("text")
    if not isinstance(text, str):
        text = event_frame_text(frame)
        frame["text"] = text  # type: ignore[typeddict-unknown-key]
    return text


class Viewer(Protocol):
    def post(self, message: GroupMessage) -> None:
        """Take a group message (`timeline.append` or `execution.status`); called in the feed's task, must not block."""

    async def feed_failed(self) -> None:
        """The feed stopped receiving; the viewer closes so its page reconnects."""


class ExecutionFeed:
    def __init__(self, group: str) -> None:
        self.group = group
        self.key = (asyncio.get_running_loop(), group)
        self.layer = get_channel_layer()
        self.viewers: dict[Viewer, None] = {}
        self.channel = ""
        self.started = asyncio.ensure_future(self._start())
        self.receiver: asyncio.Task | None = None
        # Frames at positions 1..len(remembered), each with its text.
        self.remembered: list[TimelineFrame] = []
        self.remembered_chars = 0

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
        self.receiver = asyncio.create_task(self._receive(), name=f"feed-{self.group}")

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
        if self.receiver is not None:
            self.receiver.cancel()
        if self.started.done() and not self.started.cancelled() and self.started.exception() is None:
            await self.layer.group_discard(self.group, self.channel)

    def remembered_after(self, position: int) -> list[TimelineFrame]:
        return self.remembered[position:]

    def remember(self, frames: list[TimelineFrame]) -> None:
        """Keep `frames` (in position order) if they continue what is remembered without a hole."""
        for frame in frames:
            if frame["position"] != len(self.remembered) + 1 or self.remembered_chars > CACHE_CHARS:
                continue
            self.remembered.append(frame)
            self.remembered_chars += len(text_of(frame))

    async def join_again(self) -> None:
        """A layer that keeps groups in Redis forgets them when Redis restarts; joining again is harmless."""
        await self.layer.group_add(self.group, self.channel)

    async def _receive(self) -> None:
        try:
            while True:
                message = await self.layer.receive(self.channel)
                if message.get("type") == "timeline.append":
                    try:
                        self.remember(message["frames"])
                    except Exception:
                        # One malformed message must not stop the feed of every viewer; each drops what it has.
                        log.exception("a timeline message of %s could not be remembered", self.group)
                for viewer in list(self.viewers):
                    viewer.post(message)
        except Exception:
            log.exception("the feed of %s stopped", self.group)
            self._forget()
            for viewer in list(self.viewers):
                await viewer.feed_failed()


_feeds: dict[tuple[asyncio.AbstractEventLoop, str], ExecutionFeed] = {}


def feed_for(group: str) -> ExecutionFeed:
    """This event loop's feed of `group` (a web process runs one loop)."""
    feed = _feeds.get((asyncio.get_running_loop(), group))
    if feed is None:
        feed = ExecutionFeed(group)
        _feeds[feed.key] = feed
    return feed
