"""Talking to the Host's websockets in tests: the ASGI application as a given user, a user's session cookie for
a real daphne, protocol messages joined from their pieces, and the stored timeline as the frames a viewer gets."""

from __future__ import annotations

import json

from channels.routing import URLRouter
from django.conf import settings
from django.test import Client

from observers.routing import websocket_urlpatterns
from runs.protocol import event_frame_text
from runs.services.timeline import read_side


def as_user(user):
    router = URLRouter(websocket_urlpatterns)

    async def app(scope, receive, send):
        return await router({**scope, "user": user}, receive, send)

    return app


def cookie_of(user) -> str:
    client = Client()
    client.force_login(user)
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"


async def receive_message(socket) -> dict:
    """One protocol message, joined from its pieces when it came in pieces."""
    message = json.loads(await socket.recv())
    if message["type"] != "piece":
        return message
    parts = [message["data"]]
    while len(parts) < message["count"]:
        parts.append(json.loads(await socket.recv())["data"])
    return json.loads("".join(parts))


def stored_frames(execution_pk: int) -> list[dict]:
    """The execution's whole stored timeline as the event messages a viewer receives, decoded."""
    return [json.loads(event_frame_text(frame)) for frame in read_side.frames_after(execution_pk, 0, limit=10**7)]


def frames_of(message: dict) -> list[dict]:
    if message["type"] == "events":
        return message["events"]
    return [message] if message["type"] == "event" else []
