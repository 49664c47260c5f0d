"""What the sockets send fits `runs.protocol`'s frame types exactly: no field missing, none extra, none mistyped."""

from __future__ import annotations

from typing import get_args

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from pydantic import ConfigDict, TypeAdapter

from runs.models import TimelineOrigin
from runs.protocol import (
    CLOSE_NOT_FOUND,
    ApprovalsFrame,
    ErrorFrame,
    EventFrame,
    EventsFrame,
    Origin,
    ReadyFrame,
    StatusFrame,
    ThreadStatus,
)
from tests.support import factories
from tests.support.sockets import as_user

pytestmark = pytest.mark.django_db(transaction=True)

SERVER_FRAME = TypeAdapter(
    EventFrame | EventsFrame | StatusFrame | ReadyFrame | ErrorFrame | ThreadStatus | ApprovalsFrame,
    config=ConfigDict(extra="forbid", strict=True),
)


@pytest.fixture(autouse=True)
def in_memory_layer(settings):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


async def exchange(user, path: str, subscribe: dict, *, until: str) -> list[str]:
    """Every message text the socket sends after `subscribe`, up to the first of type `until`."""
    communicator = WebsocketCommunicator(as_user(user), path)
    connected, _ = await communicator.connect()
    assert connected
    await communicator.send_json_to(subscribe)
    texts: list[str] = []
    while not texts or (f'"type": "{until}"' not in texts[-1] and f'"type":"{until}"' not in texts[-1]):
        text = await communicator.receive_from(timeout=5)
        assert isinstance(text, str), "the Host sends text messages"
        texts.append(text)
    await communicator.disconnect()
    return texts


def test_origins_are_the_columns_choices():
    assert set(get_args(Origin)) == set(TimelineOrigin.values)


async def test_every_frame_of_each_socket_fits_its_type(django_user_model):
    def seeded():
        user = django_user_model.objects.create_user("viewer", password="pw-viewer-1")
        execution = factories.make_execution()
        run = factories.make_run(execution)
        factories.append_events(run, factories.text_run_events(run, ["one ", "two"], finish=True))
        return user, execution

    user, execution = await sync_to_async(seeded)()
    timeline = await exchange(user, f"/ws/executions/{execution.pk}/", {"type": "subscribe"}, until="ready")
    bad_cursor = await exchange(
        user, f"/ws/executions/{execution.pk}/", {"type": "subscribe", "after": 10**6}, until="error"
    )
    threads = await exchange(
        user, "/ws/threads/", {"type": "subscribe", "threads": [execution.thread_id]}, until="ready"
    )
    approvals = await exchange(user, "/ws/approvals/", {"type": "subscribe"}, until="approvals")

    def types(texts: list[str]) -> list[str]:
        return [SERVER_FRAME.validate_json(text)["type"] for text in texts]

    assert types(timeline) == ["status", "events", "ready"]
    assert types(bad_cursor) == ["error"]
    assert SERVER_FRAME.validate_json(bad_cursor[0])["code"] == "cursor_beyond_end"
    assert types(threads) == ["thread.status", "ready"]
    assert types(approvals) == ["approvals"]


async def test_a_missing_execution_closes_with_the_protocols_not_found_code(django_user_model):
    user = await sync_to_async(django_user_model.objects.create_user)("viewer", password="pw-viewer-1")
    communicator = WebsocketCommunicator(as_user(user), "/ws/executions/999999/")
    await communicator.connect()
    SERVER_FRAME.validate_json(await communicator.receive_from(timeout=5))
    assert (await communicator.receive_output(timeout=5)) == {"type": "websocket.close", "code": CLOSE_NOT_FOUND}
