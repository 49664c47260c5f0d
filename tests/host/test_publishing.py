"""Timeline frames and status messages reach Channels only after their rows are committed."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.layers import get_channel_layer
from django.db.models import TextField
from django.db.models.functions import Cast

from runs.models import TimelineEvent
from runs.services.store import leases
from runs.services.timeline import RunProjection, publishing
from runs.services.worker import runner
from tests.support import factories, recording_layer
from tests.support.host_runs import DEMO_TOOLS, start

pytestmark = pytest.mark.django_db


@pytest.fixture
def sent(settings) -> list[tuple[str, dict]]:
    """Every (group, message) this process publishes, in order."""
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": recording_layer.BACKEND}}
    layer = get_channel_layer()
    assert isinstance(layer, recording_layer.RecordingChannelLayer)
    return layer.sent


def test_frames_are_published_after_commit_in_position_order(sent, django_capture_on_commit_callbacks):
    run = factories.queued_run()
    lease = leases.acquire(run.pk)
    run.run_id = factories.RUN_ID
    run.save(update_fields=["run_id"])
    with django_capture_on_commit_callbacks() as callbacks:
        RunProjection(run).record(factories.text_items(run.execution.thread.thread_id), lease=lease)
        assert sent == []
    for callback in callbacks:
        callback()
    (group, message), *_ = sent
    assert group == f"execution-{run.execution_id}" and message["type"] == "timeline.append"
    frames = message["frames"]
    stored = list(TimelineEvent.objects.filter(run=run).order_by("position"))
    assert [frame["position"] for frame in frames] == [event.position for event in stored]
    # The frame carries the event's JSON text exactly as the row stores it (encoded once).
    stored_text = TimelineEvent.objects.annotate(text=Cast("event", TextField())).get(pk=stored[0].pk).text
    assert frames[0] == {
        "position": 1,
        "run_id": factories.RUN_ID,
        "run": run.pk,
        "run_number": run.number,
        "subagent_run_id": "",
        "origin": "run",
        "event_json": stored_text,
    }
    assert json.loads(stored_text) == stored[0].event


def test_a_rolled_back_batch_is_never_published(sent, django_capture_on_commit_callbacks):
    run = factories.queued_run()
    lease = leases.acquire(run.pk)
    items = factories.text_items(run.execution.thread.thread_id)
    with django_capture_on_commit_callbacks() as callbacks:
        RunProjection(run).record(items[:1], lease=lease)
        with pytest.raises(Exception, match="journal gap"):
            RunProjection(run).record(items[2:3], lease=lease)
    assert len(callbacks) == 1
    assert TimelineEvent.objects.filter(run=run).count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_worker_run_sends_every_status_from_its_loop_not_from_the_database_thread(sent, monkeypatch):
    run = start(factories.thread(model="demo", tools=DEMO_TOOLS), "Please look up REC-42")
    # The sync route blocks its caller until Redis answers; in the worker that caller is the runs' database thread.
    through_sync_route: list[str] = []
    sync_loop = publishing._sync_loop

    def sync_route() -> publishing._LoopThread:
        through_sync_route.append(threading.current_thread().name)
        return sync_loop()

    monkeypatch.setattr(publishing, "_sync_loop", sync_route)
    del sent[:]

    assert runner.execute_run(run.pk) == "completed"

    statuses = [message["status"] for group, message in sent if message["type"] == "execution.status"]
    assert statuses[0] == "running" and statuses[-1] == "completed"
    assert through_sync_route == []


def test_harness_recover_runs_one_sweep(capsys):
    from django.core.management import call_command

    call_command("harness_recover")
    assert "abandoned 0" in capsys.readouterr().out


class _Listener:
    """A member of `group` on an event loop of its own that keeps running: the pub/sub layer delivers only to
    subscribers that are listening when a message is published."""

    def __init__(self, group: str) -> None:
        from channels.layers import get_channel_layer

        layer = get_channel_layer()
        assert layer is not None, "the tests configure a channel layer"
        self.layer = layer
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        self.channel = self._run(self._join(group))

    def _run(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=30)

    async def _join(self, group: str) -> str:
        channel = await self.layer.new_channel()
        await self.layer.group_add(group, channel)
        return channel

    def receive(self, count: int) -> list[dict]:
        """The next `count` messages; then the listener stops (its loop would otherwise outlive the test's Redis)."""

        async def receive() -> list[dict]:
            return [await self.layer.receive(self.channel) for _ in range(count)]

        try:
            return self._run(receive())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)

    def positions(self, count: int) -> list[int]:
        """The positions of the next `count` frames, however many messages carried them; then it stops."""

        async def receive() -> list[int]:
            positions: list[int] = []
            while len(positions) < count:
                message = await self.layer.receive(self.channel)
                positions += [frame["position"] for frame in message["frames"]]
            return positions

        try:
            return self._run(receive())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)


def test_plain_sync_code_publishes_in_order_through_one_kept_event_loop(redis_settings):
    listener = _Listener("sync-test")
    publishing._send("sync-test", {"type": "first"})
    loop = publishing._sync_loop().loop
    publishing._send("sync-test", {"type": "second"})
    assert publishing._sync_loop().loop is loop and loop.is_running()
    assert [message["type"] for message in listener.receive(2)] == ["first", "second"]


@pytest.mark.django_db(transaction=True)
def test_the_worker_publishes_each_committed_batch_in_order_from_its_own_loop(redis_settings):
    run = factories.queued_run()
    lease = leases.acquire(run.pk)
    run.run_id = factories.RUN_ID
    run.save(update_fields=["run_id"])
    listener = _Listener(publishing.execution_group(run.execution_id))
    items = factories.text_items(run.execution.thread.thread_id)
    projection = RunProjection(run)

    async def work() -> None:
        async with publishing.worker_sender():
            for item in items:
                await sync_to_async(projection.record)([item], lease=lease)

    async_to_sync(work)()
    stored = list(TimelineEvent.objects.filter(run=run).order_by("position").values_list("position", flat=True))
    assert listener.positions(len(stored)) == stored


def test_frames_queued_for_one_group_leave_in_one_message_and_in_order():
    def frames(*positions: int) -> dict:
        return {"type": "timeline.append", "frames": [{"position": position} for position in positions]}

    status = {"type": "execution.status", "status": "running"}
    joined = publishing._coalesced(
        [("a", frames(1, 2)), ("a", frames(3)), ("b", frames(1)), ("a", status), ("a", frames(4)), ("a", frames(5))]
    )
    assert joined == [("a", frames(1, 2, 3)), ("b", frames(1)), ("a", status), ("a", frames(4, 5))]
