"""Channels publication of committed timeline events and status changes.

Nothing is sent before its rows are durable: callers inside a transaction register the send with
`transaction.on_commit`, so a rolled-back batch is never seen by a browser. This module is the only place
that talks to the channel layer; a missing or unreachable layer never breaks a run (browsers catch up from
the database when they reconnect).

Messages leave in the order they were committed, by one of two routes. On the worker (`worker_sender`), the
write path only queues them: one task of the worker's own event loop sends them in order, so a batch's
transaction never waits for Redis. Plain sync code (approvals, the sweeper, views) hands them to one event
loop per process kept in a daemon thread, which keeps its channel layer connection between sends instead of
opening a new loop and connection for every message.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import logging
import os
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from channels.layers import BaseChannelLayer, get_channel_layer
from django.db import transaction

from runs.models import Execution
from runs.protocol import (
    ApprovalsChanged,
    GroupMessage,
    SessionEnded,
    ThreadStatus,
    TimelineAppend,
    TimelineFrame,
)

from .read_side import execution_status_message

__all__ = (
    "APPROVALS_GROUP",
    "execution_group",
    "publish_approvals_changed",
    "publish_execution_status",
    "publish_frames",
    "publish_session_ended",
    "session_group",
    "worker_sender",
)

log = logging.getLogger(__name__)

THREADS_GROUP = "threads"
# Every authenticated page: the approvals badge, the inbox.
APPROVALS_GROUP = "approvals"
# How long plain sync code waits for one send before logging it as failed and going on.
SEND_TIMEOUT_SECONDS = 10.0

GroupSend = tuple[str, GroupMessage]


def execution_group(execution_pk: int) -> str:
    return f"execution-{execution_pk}"


def session_group(session_key: str) -> str:
    """The group of one login session's sockets; hashed, so Redis never holds a usable session key."""
    return f"session-{hashlib.sha256(session_key.encode()).hexdigest()[:32]}"


async def _group_send(layer: BaseChannelLayer, group: str, message: GroupMessage) -> None:
    try:
        # types-channels asks for a dict[str, Any], which mypy never takes a TypedDict for (it is one at runtime).
        await layer.group_send(group, message)  # type: ignore[arg-type]
    except Exception:
        log.warning("could not publish %s to %s", message.get("type"), group, exc_info=True)


def _coalesced(messages: list[GroupSend]) -> list[GroupSend]:
    """The messages in order, consecutive frames for one group joined into one message.

    Each send costs Redis round trips for the group and its members; frames committed while the previous send
    was under way can share one.
    """
    joined: list[GroupSend] = []
    for group, message in messages:
        if joined and message["type"] == "timeline.append":
            last_group, last = joined[-1]
            if last_group == group and last["type"] == "timeline.append":
                joined[-1] = (group, {**last, "frames": [*last["frames"], *message["frames"]]})
                continue
        joined.append((group, message))
    return joined


class _WorkerSender:
    """Sends the worker's messages in order from one task of its event loop; others only enqueue."""

    def __init__(self, layer: BaseChannelLayer) -> None:
        self._layer = layer
        self._loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue[GroupSend] = asyncio.Queue()
        self._task = asyncio.create_task(self._run(), name="harness-publisher")
        self._closed = False

    def put(self, group: str, message: GroupMessage) -> bool:
        """From any thread (the on-commit hooks run in the worker's database thread); False once the sender is
        closed, for a hook that runs after its run ended (tests capture hooks and run them later)."""
        if self._closed or self._loop.is_closed():
            return False
        self._loop.call_soon_threadsafe(self._queue.put_nowait, (group, message))
        return True

    async def _run(self) -> None:
        while True:
            taken = [await self._queue.get()]
            while not self._queue.empty():
                taken.append(self._queue.get_nowait())
            for group, message in _coalesced(taken):
                await _group_send(self._layer, group, message)
            for _ in taken:
                self._queue.task_done()

    async def close(self) -> None:
        """Send what is queued, then stop.

        A database call's hooks reach the queue before the call's own completion reaches its awaiting task
        (both go through the loop's queue of callbacks, in that order), so nothing committed is left out.
        """
        await self._queue.join()
        self._closed = True
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


_worker_sender: contextvars.ContextVar[_WorkerSender | None] = contextvars.ContextVar("worker_sender", default=None)


@asynccontextmanager
async def worker_sender() -> AsyncIterator[None]:
    """Inside: messages committed by this task (and the sync code it calls) are sent by one background task.

    On leaving, everything queued has been sent.
    """
    layer = get_channel_layer()
    if layer is None:
        yield
        return
    sender = _WorkerSender(layer)
    token = _worker_sender.set(sender)
    try:
        yield
    finally:
        _worker_sender.reset(token)
        await sender.close()


class _LoopThread:
    """One event loop in a daemon thread, where plain sync code's sends run one after another."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, name="harness-publisher", daemon=True).start()

    def send(self, layer: BaseChannelLayer, group: str, message: GroupMessage) -> None:
        future = asyncio.run_coroutine_threadsafe(_group_send(layer, group, message), self.loop)
        try:
            future.result(timeout=SEND_TIMEOUT_SECONDS)
        except TimeoutError:
            future.cancel()
            log.warning("publishing %s to %s timed out", message.get("type"), group)


_loop_thread: _LoopThread | None = None
_loop_thread_lock = threading.Lock()


def _sync_loop() -> _LoopThread:
    global _loop_thread
    with _loop_thread_lock:
        # A forked child (an RQ work horse) does not inherit the parent's thread: it starts its own.
        if _loop_thread is None or _loop_thread.pid != os.getpid():
            _loop_thread = _LoopThread()
        return _loop_thread


def _send(group: str, message: GroupMessage, sender: _WorkerSender | None = None) -> None:
    """Send through `sender`, the worker's sender of the code that made the message, if it had one.

    The sender is taken where a hook is registered, not where it runs: on the worker, the commit that runs the hooks
    may be another run's (runs/services/worker/commit_group.py), whose sender can already be closed.
    """
    if sender is not None and sender.put(group, message):
        return
    layer = get_channel_layer()
    if layer is not None:
        _sync_loop().send(layer, group, message)


def publish_frames(execution_pk: int, frames: list[TimelineFrame]) -> None:
    """After the surrounding transaction commits, send the timeline frames to the execution's group.

    A frame is what the read side replays for a stored event (`runs.protocol.TimelineFrame`), so live and
    replayed frames are identical.
    """
    if not frames:
        return
    message = TimelineAppend(type="timeline.append", frames=frames)
    sender = _worker_sender.get()
    transaction.on_commit(lambda: _send(execution_group(execution_pk), message, sender))


def _status_messages(execution_pk: int) -> list[GroupSend]:
    execution = Execution.objects.filter(pk=execution_pk).first()
    if execution is None:
        return []
    return [
        (execution_group(execution.pk), execution_status_message(execution)),
        (
            THREADS_GROUP,
            ThreadStatus(
                type="thread.status", thread=execution.thread_id, execution=execution.pk, status=execution.status
            ),
        ),
    ]


def publish_execution_status(execution_pk: int) -> None:
    """After commit, send the execution's current status (read then, so it is the committed one)."""

    sender = _worker_sender.get()

    def send() -> None:
        for group, message in _status_messages(execution_pk):
            _send(group, message, sender)

    transaction.on_commit(send)


def publish_session_ended(session_key: str) -> None:
    """Close the sockets of a session that is logging out (now: logging out commits nothing to wait for)."""
    _send(session_group(session_key), SessionEnded(type="session.ended"), _worker_sender.get())


def publish_approvals_changed() -> None:
    """After commit, tell every page that the open requests changed (requests created, answered, expired, closed).

    The message carries nothing: each socket reads the committed open set itself, so messages that arrive
    late or out of order from different processes can never leave a page showing an older state.
    """
    sender = _worker_sender.get()
    transaction.on_commit(lambda: _send(APPROVALS_GROUP, ApprovalsChanged(type="approvals.changed"), sender))
