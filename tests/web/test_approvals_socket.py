"""The approvals websocket: the open requests on connect, and again each time a change leaves them different."""

from __future__ import annotations

from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser

from runs.models import DeferredRequest, DeferredStatus
from runs.services.timeline import APPROVALS_GROUP
from tests.factories import create_decider, suspended_execution
from tests.web.test_timeline_socket import as_user

pytestmark = pytest.mark.django_db(transaction=True)

CHANGED = {"type": "approvals.changed"}


@pytest.fixture(autouse=True)
def in_memory_layer(settings):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


async def connect(user) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(as_user(user), "/ws/approvals/")
    connected, _ = await communicator.connect()
    assert connected
    await communicator.send_json_to({"type": "subscribe"})
    return communicator


async def test_a_visitor_who_is_not_logged_in_is_turned_away():
    communicator = WebsocketCommunicator(as_user(AnonymousUser()), "/ws/approvals/")
    connected, _ = await communicator.connect()
    assert connected
    assert await communicator.receive_output(timeout=5) == {"type": "websocket.close", "code": 4401}


async def test_the_open_requests_come_on_connect_and_after_every_change_that_alters_them(django_user_model):
    # The socket counts what its user may decide.
    user = await sync_to_async(create_decider)(django_user_model, "decider", "pw-decider-1")
    first = await sync_to_async(suspended_execution)(title="first")
    communicator = await connect(user)
    opened = sorted(request.pk for request in first.requests.values())

    assert await communicator.receive_json_from(timeout=5) == {"type": "approvals", "count": 2, "requests": opened}

    second = await sync_to_async(suspended_execution)(title="second", expires_in=timedelta(minutes=5))
    await get_channel_layer().group_send(APPROVALS_GROUP, CHANGED)
    added = sorted(request.pk for request in second.requests.values())
    assert await communicator.receive_json_from(timeout=5) == {
        "type": "approvals",
        "count": 4,
        "requests": opened + added,
    }

    # A change message that leaves the set as it was sends nothing.
    await get_channel_layer().group_send(APPROVALS_GROUP, CHANGED)
    assert await communicator.receive_nothing(timeout=0.3)

    await sync_to_async(DeferredRequest.objects.filter(execution=first.execution).update)(status=DeferredStatus.DECIDED)
    await get_channel_layer().group_send(APPROVALS_GROUP, CHANGED)
    assert await communicator.receive_json_from(timeout=5) == {"type": "approvals", "count": 2, "requests": added}
    await communicator.disconnect()
