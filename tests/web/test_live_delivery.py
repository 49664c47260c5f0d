"""One design for live delivery: the AG-UI event stream follows an execution through the same per-process feed as
the timeline sockets (an `ExecutionFollower`), and ends only once the database says the execution settled."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator

import pytest
from ag_ui.core import TextMessageContentEvent
from asgiref.sync import ThreadSensitiveContext, sync_to_async
from channels.db import database_sync_to_async
from channels.layers import BaseChannelLayer, get_channel_layer

from agui_api.streams import FollowingFailed, sse_events
from runs.models import Execution
from runs.protocol import ExecutionStatusMessage
from runs.services.timeline import ExecutionFeed, Frames, execution_group, feed_for, read_side
from tests.support import factories

pytestmark = pytest.mark.django_db(transaction=True)

# Generous: a condition to wait for on a loaded machine, not a measurement.
WAIT_SECONDS = 10


@pytest.fixture(autouse=True)
def in_memory_layer(settings):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


@pytest.fixture
def running(django_user_model):
    """A token's caller, and a running run with five stored events."""
    caller = factories.token_caller(django_user_model.objects.create_user("reader", password="pw-reader-1"))
    run = factories.make_run(factories.make_execution())
    factories.append_events(run, factories.text_run_events(run, ["one", "two"], finish=False))
    return caller, run


class QuietViewer:
    """Another viewer of the process's feed, as a timeline socket is; keeps, for each offer, the type of the group
    message it came from (frames: `timeline.append`)."""

    def __init__(self) -> None:
        self.offered: list[str] = []

    async def offer(self, message: Frames | ExecutionStatusMessage) -> None:
        self.offered.append("timeline.append" if isinstance(message, Frames) else message["type"])

    async def drop(self) -> None:
        raise AssertionError("the viewer was dropped")


@contextlib.asynccontextmanager
async def a_socket_of_the_process(execution_pk: int) -> AsyncIterator[ExecutionFeed]:
    """The process's feed of the execution, with another viewer in it for as long as the block lasts."""
    socket = QuietViewer()
    feed = feed_for(execution_pk)
    await feed.add(socket)
    try:
        yield feed
    finally:
        await feed.remove(socket)


def commit(run, deltas: list[str]) -> list:
    """Commit events at the next positions; their frames, for a message (or none, as when one is lost)."""
    rows = factories.append_events(run, [TextMessageContentEvent(message_id="m1", delta=delta) for delta in deltas])
    return [read_side.frame_of(row) for row in rows]


async def commit_and_publish(run, deltas: list[str]) -> None:
    frames = await sync_to_async(commit)(run, deltas)
    await channel_layer().group_send(execution_group(run.execution_id), {"type": "timeline.append", "frames": frames})


async def set_status(execution_pk: int, status: str, *, publish: bool = True) -> None:
    await sync_to_async(Execution.objects.filter(pk=execution_pk).update)(status=status)
    if publish:
        message = await sync_to_async(read_side.execution_status_snapshot)(execution_pk)
        # As in runs/services/timeline/publishing.py: types-channels asks for a dict[str, Any], which mypy never
        # takes a TypedDict for (it is one at runtime).
        await channel_layer().group_send(execution_group(execution_pk), message)  # type: ignore[arg-type]


def channel_layer() -> BaseChannelLayer:
    layer = get_channel_layer()
    assert layer is not None, "the tests configure a channel layer"
    return layer


async def next_record(stream: AsyncIterator[str]) -> str:
    return await asyncio.wait_for(anext(stream), WAIT_SECONDS)


async def the_rest(stream: AsyncIterator[str]) -> list[str]:
    """Every record up to the stream's end."""

    async def read() -> list[str]:
        return [record async for record in stream]

    return await asyncio.wait_for(read(), WAIT_SECONDS)


async def complete(stream: AsyncIterator[str], execution_pk: int) -> list[str]:
    """Complete the execution (its status published); the records the stream sends before it ends."""
    await set_status(execution_pk, "completed")
    return await the_rest(stream)


def position(record: str) -> int:
    assert record.startswith("id: "), record
    return int(record.split("\n", 1)[0].removeprefix("id: "))


async def test_an_event_stream_follows_through_the_feed_its_process_shares_with_the_sockets(running):
    caller, run = running
    async with a_socket_of_the_process(run.execution_id):
        stream = sse_events(run.execution_id, 0, caller)
        assert [position(await next_record(stream)) for _ in range(5)] == [1, 2, 3, 4, 5]
        # The process is one member of the execution's group, for the socket and the stream alike.
        assert len(get_channel_layer().groups[execution_group(run.execution_id)]) == 1

        await commit_and_publish(run, ["live"])
        live = await next_record(stream)
        assert position(live) == 6 and '"delta":"live"' in live
        assert await complete(stream, run.execution_id) == []


async def test_a_settled_status_the_database_does_not_confirm_leaves_the_stream_open(running):
    caller, run = running
    stream = sse_events(run.execution_id, 4, caller)
    assert position(await next_record(stream)) == 5
    # A `waiting` published before a resume can arrive after it; the database says the execution is running.
    await get_channel_layer().group_send(
        execution_group(run.execution_id),
        {"type": "execution.status", "execution": run.execution_id, "status": "waiting", "runs": []},
    )
    await commit_and_publish(run, ["resumed"])
    assert position(await next_record(stream)) == 6
    await commit_and_publish(run, ["still going"])
    assert position(await next_record(stream)) == 7
    assert await complete(stream, run.execution_id) == []


async def test_a_stream_opened_after_a_resume_follows_it_though_the_feed_still_says_waiting(running):
    caller, run = running
    await set_status(run.execution_id, "waiting", publish=False)
    async with a_socket_of_the_process(run.execution_id) as feed:
        assert (await feed.note_status())["status"] == "waiting"
        # Resumed; the message saying so has not reached this process yet.
        await set_status(run.execution_id, "running", publish=False)
        stream = sse_events(run.execution_id, 5, caller)
        await commit_and_publish(run, ["resumed"])
        assert position(await next_record(stream)) == 6
        assert await complete(stream, run.execution_id) == []


async def test_a_stream_sends_the_events_whose_message_was_lost_before_it_ends(running):
    caller, run = running
    stream = sse_events(run.execution_id, 4, caller)
    assert position(await next_record(stream)) == 5
    await sync_to_async(commit)(run, ["lost on the way"])
    assert [position(record) for record in await complete(stream, run.execution_id)] == [6]


async def test_without_any_message_a_stream_catches_up_from_the_database_and_ends(running, settings):
    # Redis down: nothing published reaches the process; the feed's check reads the database this often.
    settings.HARNESS_SOCKET_REFRESH_SECONDS = 0.1
    caller, run = running
    stream = sse_events(run.execution_id, 4, caller)
    assert position(await next_record(stream)) == 5
    await sync_to_async(commit)(run, ["unheard"])
    await set_status(run.execution_id, "completed", publish=False)
    assert [position(record) for record in await the_rest(stream)] == [6]


async def test_a_stream_whose_follower_fails_breaks_off_so_the_client_resumes(running, monkeypatch):
    caller, run = running

    def broken_page(execution_pk, after, limit=read_side.REPLAY_PAGE_SIZE):
        raise RuntimeError("database went away")

    monkeypatch.setattr(read_side, "frames_after", broken_page)
    with pytest.raises(FollowingFailed):
        await next_record(sse_events(run.execution_id, 0, caller))


async def test_a_feed_an_event_stream_opened_reads_where_the_sockets_read_after_the_request(running, monkeypatch):
    """Django gives each HTTP request a thread context of its own (asgiref's ThreadSensitiveContext), which ends
    with the request; the feed a stream opened goes on serving the process's sockets after it."""
    caller, run = running
    process_thread = await database_sync_to_async(threading.get_ident)()
    readers = []
    real_page = read_side.frames_after

    def recorded_page(execution_pk, after, limit=read_side.REPLAY_PAGE_SIZE):
        readers.append(threading.get_ident())
        return real_page(execution_pk, after, limit)

    monkeypatch.setattr(read_side, "frames_after", recorded_page)
    socket = QuietViewer()
    async with ThreadSensitiveContext():
        stream = sse_events(run.execution_id, 4, caller)
        assert position(await next_record(stream)) == 5
        await feed_for(run.execution_id).add(socket)
        await stream.aclose()
    # The request is over. A status makes the feed read what was committed before it, for the socket.
    await sync_to_async(commit)(run, ["lost on the way"])
    await set_status(run.execution_id, "completed")
    for _ in range(WAIT_SECONDS * 100):
        if "execution.status" in socket.offered:
            break
        await asyncio.sleep(0.01)
    assert socket.offered == ["timeline.append", "execution.status"]
    assert len(readers) == 2 and set(readers) == {process_thread}
    await feed_for(run.execution_id).remove(socket)
