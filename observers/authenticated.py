"""The base of every Host socket: a logged-in session that stays valid, and one typed message shape.

Subclasses set `client_message` (a frozen pydantic model of what the browser may send), implement `opened()`
and `receive_message()`, and do their own clean-up in `disconnect()`. The base refuses everything else:

- not logged in: close 4401 right after accepting (so the browser sees the code);
- a binary frame, an oversized or malformed frame, or one that does not fit `client_message`: an error frame
  and close 4400;
- a session that ended: logging out sends `session.ended` to the session's group (see `end_session_sockets`),
  and every socket re-checks its session every `HARNESS_SOCKET_SESSION_CHECK_SECONDS`, which also catches sessions that
  expired or were invalidated by a password change; either way an error frame `session_ended` and close 4401.

Groups are joined with `join()`: the base leaves them on disconnect and, every `HARNESS_SOCKET_REFRESH_SECONDS`, joins
them again and calls `refresh()`, where a subclass catches up from the database. A group message can be lost
(pub/sub delivers at most once, a Redis restart drops what is in flight) and a layer that keeps memberships in
Redis forgets them when it restarts; without this a socket that stayed open would go deaf.

Codes, frames and client messages are defined in `runs.protocol`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any, ClassVar, Generic, TypeVar, cast

from asgiref.typing import WebSocketDisconnectEvent
from channels.consumer import get_handler_name
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.http import HttpRequest
from pydantic import BaseModel, ValidationError

from runs.protocol import (
    CLOSE_BAD_REQUEST,
    CLOSE_INTERNAL_ERROR,
    CLOSE_NOT_FOUND,
    CLOSE_UNAUTHENTICATED,
    MAX_MESSAGE_CHARS,
    ErrorCode,
    ErrorFrame,
    SessionEnded,
    pieces,
)
from runs.services.store import session_user_pk
from runs.services.timeline import publish_session_ended, session_group

log = logging.getLogger(__name__)

ClientMessageT = TypeVar("ClientMessageT", bound=BaseModel)


def end_session_sockets(sender: Any, request: HttpRequest | None = None, **kwargs: Any) -> None:
    """`user_logged_out` receiver: close the sockets (and end the AG-UI event streams) opened with the session
    being logged out."""
    session = getattr(request, "session", None)
    if session is not None and session.session_key:
        publish_session_ended(session.session_key)


class AuthenticatedJsonConsumer(AsyncJsonWebsocketConsumer, Generic[ClientMessageT]):
    client_message: type[ClientMessageT]
    """What the browser may send; anything else closes the socket with 4400."""

    field_error_codes: ClassVar[dict[str, ErrorCode]] = {}
    """Error code for a message refused because of this field (default `bad_request`)."""

    expected_shape: ClassVar[str] = ""
    """Shown in the error message of a refused frame."""

    session_key: str | None = None
    session_watch: asyncio.Task[None] | None = None
    refresher: asyncio.Task[None] | None = None
    sent_messages = 0

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.accept()
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        session = self.scope.get("session")
        # Always there behind `socket_auth_stack`; tests of one consumer may hand it a bare user.
        self.session_key = session.session_key if session is not None else None
        self.joined: set[str] = set()
        if self.session_key:
            # Joined before accepting: a logout the browser sees after its socket opened always reaches it.
            await self.join(session_group(self.session_key))
        await self.accept()
        if self.session_key:
            self.session_watch = asyncio.create_task(self._watch_session(self.session_key, user.pk))
        self.refresher = asyncio.create_task(self._keep_joined())
        await self.opened()

    @property
    def user(self) -> User | AnonymousUser:
        """The scope's user: Channels' lazy proxy of the session's user, which types-channels types as a base user."""
        return cast("User | AnonymousUser", self.scope["user"])

    async def opened(self) -> None:
        """Called once an authenticated connection is accepted."""

    async def receive_message(self, message: ClientMessageT) -> None:
        """Called with each frame that fits `client_message`."""

    async def dispatch(self, message: dict[str, Any]) -> None:
        """Channels' dispatch without its `close_old_connections` before every message.

        That call is a hop to the one thread all database work shares, once per message per socket: with a
        thousand viewers of a live run it queued every live frame behind every other socket's. These consumers
        reach the database only through `database_sync_to_async`, which closes old connections itself.
        """
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)

    async def join(self, group: str) -> None:
        """Join `group` for as long as the socket is open (joined again at every refresh)."""
        await self.channel_layer.group_add(group, self.channel_name)
        self.joined.add(group)

    async def refresh(self) -> None:
        """Called every `HARNESS_SOCKET_REFRESH_SECONDS`, after the groups were joined again: send what lost messages
        said."""

    async def websocket_disconnect(self, message: WebSocketDisconnectEvent) -> None:
        for task in (self.session_watch, self.refresher):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        for group in getattr(self, "joined", ()):
            await self.channel_layer.group_discard(group, self.channel_name)
        await super().websocket_disconnect(message)

    async def send_json(self, content: Any, close: bool = False) -> None:
        await self.send_encoded(await self.encode_json(content))
        if close:
            await self.close()

    async def send_encoded(self, text: str) -> None:
        """One message's JSON text (ASCII); over daphne's limit it goes out in pieces (`runs.protocol.pieces`)."""
        self.sent_messages += 1
        for piece in pieces(text, self.sent_messages):
            await self.send(text_data=piece)

    async def fail(self, code: ErrorCode, message: str, *, close_code: int = CLOSE_BAD_REQUEST) -> None:
        await self.send_json(ErrorFrame(type="error", code=code, message=message))
        await self.close(code=close_code)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any) -> None:
        if text_data is None:
            await self.fail(
                ErrorCode.BAD_REQUEST, f"Binary frames are not accepted; send JSON text: {self.expected_shape}."
            )
            return
        if len(text_data) > MAX_MESSAGE_CHARS:
            await self.fail(ErrorCode.TOO_LARGE, f"A message may have at most {MAX_MESSAGE_CHARS} characters.")
            return
        try:
            message = self.client_message.model_validate_json(text_data)
        except ValidationError as exc:
            error = exc.errors(include_url=False)[0]
            field = str(error["loc"][0]) if error["loc"] else ""
            where = ".".join(str(part) for part in error["loc"]) or "message"
            await self.fail(
                self.field_error_codes.get(field, ErrorCode.BAD_REQUEST),
                f"{where}: {error['msg']}. Expected {self.expected_shape}.",
            )
            return
        await self.receive_message(message)

    async def session_ended(self, message: SessionEnded) -> None:
        await self.fail(ErrorCode.SESSION_ENDED, "The session ended; log in again.", close_code=CLOSE_UNAUTHENTICATED)

    async def _keep_joined(self) -> None:
        while True:
            await asyncio.sleep(settings.HARNESS_SOCKET_REFRESH_SECONDS)
            try:
                for group in list(self.joined):
                    await self.channel_layer.group_add(group, self.channel_name)
                await self.refresh()
            except Exception:
                # Closing makes the page reconnect and resume from its cursor instead of waiting on a deaf socket.
                log.exception("refreshing a %s failed", type(self).__name__)
                await self.close(code=CLOSE_INTERNAL_ERROR)
                return

    async def _watch_session(self, session_key: str, user_pk: Any) -> None:
        while True:
            await asyncio.sleep(settings.HARNESS_SOCKET_SESSION_CHECK_SECONDS)
            try:
                still = await database_sync_to_async(session_user_pk)(session_key)
            except Exception:
                log.exception("could not re-check the session of a socket")
                await self.close(code=CLOSE_INTERNAL_ERROR)
                return
            if still != user_pk:
                await self.session_ended(SessionEnded(type="session.ended"))
                return
            if not await self.still_allowed():
                return

    async def still_allowed(self) -> bool:
        """Checked with the session: whether the user may still watch what the socket shows; a subclass that
        shows one object closes (as for an object that does not exist) and answers False once they may not."""
        return True


class NoSuchSocketConsumer(AuthenticatedJsonConsumer[BaseModel]):
    """Every websocket path that matches no route, e.g. `/ws/executions/-1/`: 4404 instead of an HTTP 500."""

    async def opened(self) -> None:
        await self.fail(ErrorCode.NOT_FOUND, "There is no socket at this address.", close_code=CLOSE_NOT_FOUND)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any) -> None:
        """Frames that raced the close are ignored."""
