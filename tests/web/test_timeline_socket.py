"""The execution websocket: replay from the database, `ready`, then live frames with no gap and no duplicate."""

from __future__ import annotations

import asyncio
import json

import pytest
from ag_ui.core import TextMessageContentEvent
from asgiref.sync import async_to_sync, sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser
from django.db import transaction

from runs.models import Execution
from runs.protocol import TimelineFrame
from runs.services.timeline import execution_group, feed_for, read_side
from tests.support import factories
from tests.support.sockets import as_user

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def in_memory_layer(settings):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


def commit_and_publish(run, chunks):
    """What the worker does: commit timeline rows, then publish them to the execution's group."""
    rows = factories.append_events(run, [TextMessageContentEvent(message_id="m1", delta=c) for c in chunks])
    frames = [read_side.frame_of(row) for row in rows]
    async_to_sync(get_channel_layer().group_send)(
        execution_group(run.execution_id), {"type": "timeline.append", "frames": frames}
    )
    return frames


async def receive_until(communicator, predicate, limit=5000):
    """Messages up to the first one matching; `events` batches are unpacked into their event frames."""
    received = []
    for _ in range(limit):
        message = await communicator.receive_json_from(timeout=5)
        for item in message["events"] if message["type"] == "events" else [message]:
            received.append(item)
            if predicate(item):
                return received
    raise AssertionError("predicate never matched")


@pytest.fixture
def seeded_run(django_user_model):
    user = django_user_model.objects.create_user("viewer", password="pw-viewer-1")
    execution = factories.make_execution()
    run = factories.make_run(execution)
    factories.append_events(run, factories.text_run_events(run, [f"chunk {i} " for i in range(1097)], finish=False))
    return user, run


async def connect(user, execution_pk):
    communicator = WebsocketCommunicator(as_user(user), f"/ws/executions/{execution_pk}/")
    connected, _ = await communicator.connect()
    assert connected
    return communicator


async def test_events_committed_during_replay_are_delivered_exactly_once(seeded_run, monkeypatch):
    user, run = seeded_run
    stored = await sync_to_async(read_side.last_position)(run.execution_id)
    assert stored == 1100  # RUN_STARTED, TEXT_MESSAGE_START, 1097 deltas, TEXT_MESSAGE_END
    real_page = read_side.frames_after
    calls = []
    # Pages of 500, so the 1100 stored events take three.
    monkeypatch.setattr(read_side, "REPLAY_PAGE_SIZE", 500)

    def interleaving_page(execution_pk, after, limit=500):
        calls.append(after)
        page = real_page(execution_pk, after, limit)
        if len(calls) == 1:
            # Committed after the first page was read: the replay's later pages must pick these up,
            # and their live copies must be dropped.
            commit_and_publish(run, ["during-replay-a", "during-replay-b", "during-replay-c"])
        elif len(page) < limit:
            # Committed after the last page was read: only the buffered live copies can deliver these.
            commit_and_publish(run, ["after-last-page-a", "after-last-page-b"])
        return page

    monkeypatch.setattr(read_side, "frames_after", interleaving_page)
    communicator = await connect(user, run.execution_id)
    await communicator.send_json_to({"type": "subscribe", "after": None, "execution": run.execution_id})
    received = await receive_until(communicator, lambda m: m["type"] == "ready")
    assert received[0]["type"] == "status"
    assert received[0]["runs"][0]["run_id"] == run.run_id
    ready = received[-1]
    replayed = [m["position"] for m in received if m["type"] == "event"]
    assert replayed == list(range(1, 1104))
    assert ready == {"type": "ready", "position": 1103}
    assert calls == [0, 500, 1000]

    buffered = await receive_until(communicator, lambda m: m.get("position") == 1105)
    assert [m["position"] for m in buffered] == [1104, 1105]
    assert [m["event"]["delta"] for m in buffered] == ["after-last-page-a", "after-last-page-b"]

    # Live after the handoff; a republished old frame is dropped.
    live = await sync_to_async(commit_and_publish)(run, ["live-a"])
    await sync_to_async(async_to_sync(get_channel_layer().group_send))(
        execution_group(run.execution_id), {"type": "timeline.append", "frames": buffered + live}
    )
    message = await communicator.receive_json_from(timeout=5)
    assert message["type"] == "event"
    assert message["position"] == 1106
    assert message["event"]["delta"] == "live-a"
    assert await communicator.receive_nothing(timeout=0.3)
    await communicator.disconnect()


async def test_frames_carry_run_and_the_standard_agui_encoding(seeded_run):
    user, run = seeded_run
    communicator = await connect(user, run.execution_id)
    await communicator.send_json_to({"type": "subscribe", "after": 1098})
    received = await receive_until(communicator, lambda m: m["type"] == "ready")
    events = [m for m in received if m["type"] == "event"]
    assert [m["position"] for m in events] == [1099, 1100]
    assert events[0] == {
        "type": "event",
        "position": 1099,
        "run_id": run.run_id,
        "run": run.pk,
        "run_number": run.number,
        "subagent_run_id": "",
        "origin": "run",
        "event": {
            "type": "TEXT_MESSAGE_CONTENT",
            "timestamp": events[0]["event"]["timestamp"],
            "messageId": "m1",
            "delta": "chunk 1096 ",
        },
    }
    await communicator.disconnect()


async def test_a_lost_live_message_is_filled_from_the_database(seeded_run):
    user, run = seeded_run
    communicator = await connect(user, run.execution_id)
    await communicator.send_json_to({"type": "subscribe", "after": 1100})
    assert (await communicator.receive_json_from())["type"] == "status"
    assert await communicator.receive_json_from() == {"type": "ready", "position": 1100}
    # Two commits, but the first one's message never reaches the group (as when a layer drops it).
    await sync_to_async(factories.append_events)(run, [TextMessageContentEvent(message_id="m1", delta="lost")])
    await sync_to_async(commit_and_publish)(run, ["published"])
    message = await communicator.receive_json_from()
    assert message["type"] == "events"
    assert [(frame["type"], frame["position"], frame["event"]["delta"]) for frame in message["events"]] == [
        ("event", 1101, "lost"),
        ("event", 1102, "published"),
    ]
    await communicator.disconnect()


async def test_a_status_change_first_delivers_committed_events_whose_message_was_lost(seeded_run):
    user, run = seeded_run
    communicator = await connect(user, run.execution_id)
    await communicator.send_json_to({"type": "subscribe", "after": 1100})
    await receive_until(communicator, lambda m: m["type"] == "ready")
    # The run's last events are committed but their message never arrives; then the run ends.
    await sync_to_async(factories.append_events)(run, [TextMessageContentEvent(message_id="m1", delta="tail")])
    await get_channel_layer().group_send(
        execution_group(run.execution_id),
        {"type": "execution.status", "execution": run.execution_id, "status": "completed", "runs": []},
    )
    tail = await communicator.receive_json_from()
    assert (tail["type"], tail["position"], tail["event"]["delta"]) == ("event", 1101, "tail")
    assert await communicator.receive_json_from() == {
        "type": "status",
        "execution": run.execution_id,
        "status": "completed",
        "runs": [],
    }
    await communicator.disconnect()


@pytest.mark.parametrize(
    ("request_", "code"),
    [
        ({"type": "subscribe", "after": 5000}, "cursor_beyond_end"),
        ({"type": "subscribe", "after": -1}, "bad_cursor"),
        ({"type": "subscribe", "after": "12"}, "bad_cursor"),
        ({"type": "subscribe", "after": True}, "bad_cursor"),
        ({"type": "subscribe", "after": 3, "execution": 999999}, "cursor_execution_mismatch"),
        ({"type": "hello"}, "bad_request"),
    ],
)
async def test_bad_cursors_get_an_error_frame_and_the_socket_closes(seeded_run, request_, code):
    user, run = seeded_run
    communicator = await connect(user, run.execution_id)
    await communicator.send_json_to(request_)
    error = await communicator.receive_json_from()
    assert error["type"] == "error"
    assert error["code"] == code
    assert error["message"]
    assert (await communicator.receive_output())["type"] == "websocket.close"


async def test_unknown_execution_is_refused(seeded_run):
    user, _ = seeded_run
    communicator = await connect(user, 987654)
    assert (await communicator.receive_json_from())["code"] == "not_found"
    closed = await communicator.receive_output()
    assert closed == {"type": "websocket.close", "code": 4404}


async def test_unauthenticated_connections_are_closed_with_4401(seeded_run):
    _, run = seeded_run
    communicator = WebsocketCommunicator(as_user(AnonymousUser()), f"/ws/executions/{run.execution_id}/")
    connected, _ = await communicator.connect()
    assert connected
    assert await communicator.receive_output() == {"type": "websocket.close", "code": 4401}


async def test_thread_list_socket_sends_current_statuses_then_live_ones(seeded_run):
    user, run = seeded_run
    communicator = WebsocketCommunicator(as_user(user), "/ws/threads/")
    assert (await communicator.connect())[0]
    thread_pk = await sync_to_async(lambda: run.execution.thread_id)()
    await communicator.send_json_to({"type": "subscribe", "threads": [thread_pk]})
    assert await communicator.receive_json_from() == {
        "type": "thread.status",
        "thread": thread_pk,
        "execution": run.execution_id,
        "status": "running",
    }
    assert await communicator.receive_json_from() == {"type": "ready"}
    await get_channel_layer().group_send(
        "threads", {"type": "thread.status", "thread": thread_pk, "execution": run.execution_id, "status": "waiting"}
    )
    assert (await communicator.receive_json_from())["status"] == "waiting"
    await communicator.disconnect()


async def test_a_failing_replay_closes_the_socket_so_the_client_reconnects(seeded_run, monkeypatch):
    user, run = seeded_run

    def broken_page(execution_pk, after, limit=read_side.REPLAY_PAGE_SIZE):
        raise RuntimeError("database went away")

    monkeypatch.setattr(read_side, "frames_after", broken_page)
    communicator = await connect(user, run.execution_id)
    await communicator.send_json_to({"type": "subscribe", "after": None})
    assert (await communicator.receive_json_from())["type"] == "status"
    assert await communicator.receive_output() == {"type": "websocket.close", "code": 4500}


async def test_a_socket_that_lost_its_group_joins_again_and_catches_up(seeded_run, settings):
    settings.HARNESS_SOCKET_REFRESH_SECONDS = 0.1
    user, run = seeded_run
    communicator = await connect(user, run.execution_id)
    await communicator.send_json_to({"type": "subscribe", "after": 1100})
    await receive_until(communicator, lambda m: m["type"] == "ready")
    # A restarted Redis forgets every group membership: nothing published from now on reaches this socket.
    layer = get_channel_layer()
    for channel in list(layer.groups.get(execution_group(run.execution_id), {})):
        await layer.group_discard(execution_group(run.execution_id), channel)
    await sync_to_async(commit_and_publish)(run, ["unheard"])
    await sync_to_async(Execution.objects.filter(pk=run.execution_id).update)(status="completed")

    tail = await communicator.receive_json_from(timeout=5)
    assert (tail["type"], tail["position"], tail["event"]["delta"]) == ("event", 1101, "unheard")
    status = await communicator.receive_json_from(timeout=5)
    assert (status["type"], status["status"]) == ("status", "completed")
    # Back in the group: live messages arrive again.
    await sync_to_async(commit_and_publish)(run, ["heard"])
    live = await communicator.receive_json_from(timeout=5)
    assert (live["position"], live["event"]["delta"]) == (1102, "heard")
    await communicator.disconnect()


async def test_a_status_published_during_the_replay_comes_after_ready(seeded_run, monkeypatch):
    user, run = seeded_run
    real_page = read_side.frames_after
    monkeypatch.setattr(read_side, "REPLAY_PAGE_SIZE", 500)
    calls = []

    def page_then_finish(execution_pk, after, limit=500):
        calls.append(after)
        page = real_page(execution_pk, after, limit)
        if len(calls) == 1:
            # The run ends while the replay is still on its first page of three.
            commit_and_publish(run, ["last words"])
            async_to_sync(get_channel_layer().group_send)(
                execution_group(run.execution_id),
                {"type": "execution.status", "execution": run.execution_id, "status": "completed", "runs": []},
            )
        return page

    monkeypatch.setattr(read_side, "frames_after", page_then_finish)
    communicator = await connect(user, run.execution_id)
    await communicator.send_json_to({"type": "subscribe", "after": None})
    received = await receive_until(communicator, lambda m: m.get("status") == "completed")
    kinds = [(m["type"], m.get("position")) for m in received]
    # A viewer that sees the end after `ready` has every event before it.
    assert kinds[0] == ("status", None)
    assert kinds[-3:] == [("event", 1101), ("ready", 1101), ("status", None)]
    await communicator.disconnect()


async def test_a_refresh_never_reports_an_end_before_the_events_committed_with_it(seeded_run, settings, monkeypatch):
    settings.HARNESS_SOCKET_REFRESH_SECONDS = 0.1
    user, run = seeded_run
    communicator = await connect(user, run.execution_id)
    await communicator.send_json_to({"type": "subscribe", "after": 1100})
    await receive_until(communicator, lambda m: m["type"] == "ready")
    real_snapshot = read_side.execution_status_snapshot

    def end_then_snapshot(execution_pk):
        if not Execution.objects.filter(pk=execution_pk, status="completed").exists():
            # The run's last event and its end commit together, just as the refresh looks (and no message
            # about them reaches this socket).
            with transaction.atomic():
                factories.append_events(run, [TextMessageContentEvent(message_id="m1", delta="last")])
                Execution.objects.filter(pk=execution_pk).update(status="completed")
        return real_snapshot(execution_pk)

    monkeypatch.setattr(read_side, "execution_status_snapshot", end_then_snapshot)
    tail = await communicator.receive_json_from(timeout=5)
    assert (tail["type"], tail["position"]) == ("event", 1101)
    status = await communicator.receive_json_from(timeout=5)
    assert (status["type"], status["status"]) == ("status", "completed")
    await communicator.disconnect()


async def test_viewers_in_one_process_share_one_subscription_and_still_miss_nothing(seeded_run, monkeypatch):
    user, run = seeded_run
    first = await connect(user, run.execution_id)
    await first.send_json_to({"type": "subscribe", "after": None})
    await receive_until(first, lambda m: m["type"] == "ready")
    # Committed without a message reaching anyone: the process remembers positions 1..1100 only.
    await sync_to_async(factories.append_events)(run, [TextMessageContentEvent(message_id="m1", delta="quiet")])
    reads = []
    real_page = read_side.frames_after

    def counted_page(execution_pk, after, limit=read_side.REPLAY_PAGE_SIZE):
        reads.append(after)
        return real_page(execution_pk, after, limit)

    monkeypatch.setattr(read_side, "frames_after", counted_page)
    second = await connect(user, run.execution_id)
    await second.send_json_to({"type": "subscribe", "after": None})
    replayed = await receive_until(second, lambda m: m["type"] == "ready")
    # The second viewer's replay came from what the first one read, and the database only from there on.
    assert reads == [1100]
    assert [m["position"] for m in replayed if m["type"] == "event"] == list(range(1, 1102))
    assert len(get_channel_layer().groups[execution_group(run.execution_id)]) == 1

    await sync_to_async(commit_and_publish)(run, ["live"])
    for communicator in (first, second):
        live = await receive_until(communicator, lambda m: m.get("position") == 1102)
        assert [m["position"] for m in live if m["type"] == "event"] == (
            [1101, 1102] if communicator is first else [1102]
        )
        await communicator.disconnect()
    assert execution_group(run.execution_id) not in get_channel_layer().groups


async def test_a_feed_keeps_each_frame_exactly_as_published_with_its_text_beside_it(seeded_run):
    """What a socket sends is made once per frame, kept beside the frame: the frames a feed remembers, read back or
    received live, hold exactly the fields of `TimelineFrame`."""
    user, run = seeded_run
    communicator = await connect(user, run.execution_id)
    await communicator.send_json_to({"type": "subscribe", "after": None})
    await receive_until(communicator, lambda m: m["type"] == "ready")
    published = await sync_to_async(commit_and_publish)(run, ["live-a", "live-b"])
    received = await receive_until(communicator, lambda m: m.get("position") == 1102)

    remembered = feed_for(run.execution_id).remembered
    assert [frame.position for frame in remembered] == list(range(1, 1103))
    assert [frame.frame for frame in remembered[-2:]] == published
    assert all(frame.frame.keys() == TimelineFrame.__required_keys__ for frame in remembered)
    assert [json.loads(frame.text) for frame in remembered[-2:]] == received
    await communicator.disconnect()


class HeldViewer:
    """A second viewer of the feed whose first message is held until released: the feed falls behind meanwhile."""

    def __init__(self) -> None:
        self.offered: list[list[int]] = []
        self.release = asyncio.Event()

    async def offer(self, message) -> None:
        self.offered.append([frame.position for frame in message.frames])
        if len(self.offered) == 1:
            await self.release.wait()

    async def drop(self) -> None:
        raise AssertionError("the held viewer was dropped")


async def test_messages_that_pile_up_while_the_feed_is_behind_go_out_as_one_and_none_is_lost(seeded_run):
    user, run = seeded_run
    communicator = await connect(user, run.execution_id)
    await communicator.send_json_to({"type": "subscribe", "after": 1100})
    await receive_until(communicator, lambda m: m["type"] == "ready")
    feed = feed_for(run.execution_id)
    held = HeldViewer()
    await feed.add(held)

    await sync_to_async(commit_and_publish)(run, ["first"])
    first = await communicator.receive_json_from(timeout=5)
    assert (first["type"], first["position"]) == ("event", 1101)
    # The feed is stuck offering 1101 to the held viewer while two more messages arrive.
    await sync_to_async(commit_and_publish)(run, ["second"])
    await sync_to_async(commit_and_publish)(run, ["third"])
    for _ in range(500):
        if len(feed.arrived) == 2:
            break
        await asyncio.sleep(0.01)
    assert len(feed.arrived) == 2
    held.release.set()

    piled = await communicator.receive_json_from(timeout=5)
    assert piled["type"] == "events"
    assert [(e["position"], e["event"]["delta"]) for e in piled["events"]] == [(1102, "second"), (1103, "third")]
    assert held.offered == [[1101], [1102, 1103]]
    assert await communicator.receive_nothing(timeout=0.3)
    await feed.remove(held)
    await communicator.disconnect()
