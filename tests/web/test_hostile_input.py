"""Hostile input at every boundary: each form field, query parameter and socket message gets a clear refusal, never
a 500 and never a change. tests/host/test_postgres.py runs this file against PostgreSQL as well, which refuses
NUL bytes and out-of-range integers that SQLite would store."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator

from observers.routing import websocket_urlpatterns
from tests.web import seed

pytestmark = pytest.mark.django_db(transaction=True)

HUGE = 2**70


@pytest.fixture(autouse=True)
def in_memory_layer(settings):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


@pytest.fixture
def viewer(django_user_model):
    return django_user_model.objects.create_user("hostile", password="pw-hostile-1")


def as_user(user):
    router = URLRouter(websocket_urlpatterns)

    async def app(scope, receive, send):
        return await router({**scope, "user": user}, receive, send)

    return app


async def refused(user, path: str, frame: str | bytes | None) -> tuple[dict, dict]:
    """Connect, send one frame (text or binary), and return the error frame and the close message."""
    communicator = WebsocketCommunicator(as_user(user), path)
    connected, _ = await communicator.connect()
    assert connected
    if isinstance(frame, bytes):
        await communicator.send_to(bytes_data=frame)
    elif frame is not None:
        await communicator.send_to(text_data=frame)
    error = await communicator.receive_json_from(timeout=5)
    closed = await communicator.receive_output(timeout=5)
    return error, closed


SOCKET_FRAMES = {
    "binary": b'{"type": "subscribe"}',
    "not json": "subscribe me",
    "nul byte": '{"type": "subscribe\\u0000", "after": null}',
    "nested 100k deep": "[" * 100_000 + "]" * 100_000,
    "nested within the size limit": '{"type": "subscribe", "after": ' + "[" * 3000 + "]" * 3000 + "}",
    "huge integer": '{"type": "subscribe", "after": ' + "9" * 4000 + "}",
    "integer above 64 bits": json.dumps({"type": "subscribe", "after": HUGE}),
    "float": '{"type": "subscribe", "after": 1e400}',
    "string": json.dumps({"type": "subscribe", "after": "12"}),
    "bool": json.dumps({"type": "subscribe", "after": True}),
    "negative": json.dumps({"type": "subscribe", "after": -1}),
    "unknown type": json.dumps({"type": "unsubscribe"}),
    "unknown field": json.dumps({"type": "subscribe", "after": None, "admin": True}),
    "list": json.dumps([{"type": "subscribe"}]),
    "execution above 64 bits": json.dumps({"type": "subscribe", "execution": HUGE}),
    "oversized": json.dumps({"type": "subscribe", "pad": "x" * 100_000}),
}


@pytest.mark.parametrize("frame", SOCKET_FRAMES.values(), ids=SOCKET_FRAMES.keys())
async def test_every_malformed_timeline_frame_is_refused_with_4400(viewer, frame):
    execution = await sync_to_async(seed.make_execution)()
    error, closed = await refused(viewer, f"/ws/executions/{execution.pk}/", frame)
    assert error["type"] == "error"
    assert error["code"] in {"bad_request", "bad_cursor", "too_large"}
    assert error["message"]
    assert closed == {"type": "websocket.close", "code": 4400}


THREAD_FRAMES = {
    **{name: frame for name, frame in SOCKET_FRAMES.items() if "after" not in str(frame)},
    "thread pk above 64 bits": json.dumps({"type": "subscribe", "threads": [HUGE]}),
    "thread pk zero": json.dumps({"type": "subscribe", "threads": [0]}),
    "thread pk string": json.dumps({"type": "subscribe", "threads": ["1"]}),
    "threads not a list": json.dumps({"type": "subscribe", "threads": {"1": 1}}),
    "too many threads": json.dumps({"type": "subscribe", "threads": list(range(1, 1000))}),
    "nested threads": json.dumps({"type": "subscribe", "threads": [[1]]}),
}


@pytest.mark.parametrize("frame", THREAD_FRAMES.values(), ids=THREAD_FRAMES.keys())
async def test_every_malformed_threads_frame_is_refused_with_4400(viewer, frame):
    error, closed = await refused(viewer, "/ws/threads/", frame)
    assert error["type"] == "error"
    assert error["code"] in {"bad_request", "too_large"}
    assert closed == {"type": "websocket.close", "code": 4400}


async def test_unknown_thread_pks_are_skipped_and_known_ones_answered(viewer):
    execution = await sync_to_async(seed.make_execution)()
    communicator = WebsocketCommunicator(as_user(viewer), "/ws/threads/")
    assert (await communicator.connect())[0]
    await communicator.send_json_to({"type": "subscribe", "threads": [987654, execution.thread_id, 2**63 - 1]})
    assert (await communicator.receive_json_from())["thread"] == execution.thread_id
    assert await communicator.receive_json_from() == {"type": "ready"}
    await communicator.disconnect()


@pytest.mark.parametrize(
    "path",
    [
        "/ws/executions/-1/",
        "/ws/executions/abc/",
        "/ws/executions/0/",
        f"/ws/executions/{HUGE}/",
        "/ws/executions/987654/",
        "/ws/executions/",
        "/ws/nothing/",
        "/ws/executions/1/%00/",
    ],
)
async def test_unknown_socket_addresses_are_closed_with_4404(viewer, path):
    error, closed = await refused(viewer, path, None)
    assert error["code"] == "not_found"
    assert closed == {"type": "websocket.close", "code": 4404}
