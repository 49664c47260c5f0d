"""A long replay: rows read in large pages, events sent as their stored text in messages that each fit a piece."""

from __future__ import annotations

import json

import pytest

from runs.protocol import PIECE_CHARS, TimelineFrame
from runs.services.timeline import read_side
from tests.support import factories
from tests.support.sockets import as_user

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def in_memory_layer(settings):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


async def test_a_long_replay_arrives_whole_in_messages_that_each_fit_a_piece(django_user_model):
    from asgiref.sync import sync_to_async
    from channels.testing import WebsocketCommunicator

    user = await sync_to_async(django_user_model.objects.create_user)("viewer", password="pw-viewer-1")

    def seeded() -> tuple[int, list[TimelineFrame]]:
        run = factories.make_run(factories.make_execution(status="running"))
        chunks = [f"chunk {number} é " + "x" * 200 for number in range(4000)]
        factories.append_events(run, factories.text_run_events(run, chunks, finish=False))
        return run.execution_id, read_side.frames_after(run.execution_id, 0, limit=10_000)

    execution_pk, stored = await sync_to_async(seeded)()
    communicator = WebsocketCommunicator(as_user(user), f"/ws/executions/{execution_pk}/")
    assert (await communicator.connect())[0]
    await communicator.send_json_to({"type": "subscribe", "after": None})
    texts = []
    while True:
        text = await communicator.receive_from(timeout=10)
        message = json.loads(text)
        if message["type"] == "ready":
            break
        texts.append(text)
    await communicator.disconnect()

    messages = [json.loads(text) for text in texts[1:]]
    assert all(message["type"] == "events" for message in messages) and len(messages) > 2
    assert all(len(text) <= PIECE_CHARS for text in texts)
    frames = [frame for message in messages for frame in message["events"]]
    assert [frame["position"] for frame in frames] == list(range(1, len(stored) + 1))
    # Each event is its stored text, spliced in (the non-ASCII delta arrives escaped and intact).
    assert [frame["event"] for frame in frames] == [json.loads(frame["event_json"]) for frame in stored]
    assert frames[5]["event"]["delta"].startswith("chunk 3 é ")
