"""Talking to the Host's websockets in tests: the ASGI application as a given user, a user's session cookie for
a real daphne, protocol messages joined from their pieces, and the stored timeline as the frames a viewer gets."""

from __future__ import annotations

import json
from typing import Any

from asgiref.typing import ASGI3Application, ASGIReceiveCallable, ASGISendCallable, Scope
from channels.routing import URLRouter
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client
from websockets.asyncio.client import ClientConnection

from observers.routing import websocket_urlpatterns
from runs.protocol import event_frame_text
from runs.services.timeline import read_side


def as_user(user: User) -> ASGI3Application:
    # As in harness_site/asgi.py: types-channels wants the routes typed as Channels' own, django-stubs types them
    # as HTTP routes.
    router = URLRouter(websocket_urlpatterns)  # type: ignore[arg-type]

    async def app(scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
        # The scope Channels' auth middleware would give, with the user itself in place of its lazy object (which
        # is all types-channels accepts there).
        with_user: Any = {**scope, "user": user}
        await router(with_user, receive, send)

    return app


def cookie_of(user: User) -> str:
    client = Client()
    client.force_login(user)
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"


async def receive_message(socket: ClientConnection) -> dict[str, Any]:
    """One protocol message, joined from its pieces when it came in pieces."""
    message: dict[str, Any] = json.loads(await socket.recv())
    if message["type"] != "piece":
        return message
    parts = [message["data"]]
    while len(parts) < message["count"]:
        parts.append(json.loads(await socket.recv())["data"])
    joined: dict[str, Any] = json.loads("".join(parts))
    return joined


def stored_frames(execution_pk: int) -> list[dict[str, Any]]:
    """The execution's whole stored timeline as the event messages a viewer receives, decoded."""
    return [json.loads(event_frame_text(frame)) for frame in read_side.frames_after(execution_pk, 0, limit=10**7)]


def frames_of(message: dict[str, Any]) -> list[dict[str, Any]]:
    if message["type"] == "events":
        events: list[dict[str, Any]] = message["events"]
        return events
    return [message] if message["type"] == "event" else []
