"""The session and user of a websocket, without Channels' wrapper around every message the socket sends.

Channels' `SessionMiddleware` wraps the application's `send` so that a modified session is saved with an HTTP
response; it never saves on a websocket message, yet each message every socket sends goes through that wrapper
and two session-proxy lookups. With a thousand viewers of a live run that was about a fifteenth of daphne's event
loop (BENCHMARKS.md, viewers). The Host's sockets only read the session, so `socket_auth_stack` puts the session
store in the scope and passes `send` on as it is; Channels' own `CookieMiddleware` and `AuthMiddleware` do the rest.
"""

from __future__ import annotations

from typing import Any

from channels.auth import AuthMiddleware
from channels.middleware import BaseMiddleware
from channels.sessions import CookieMiddleware
from django.conf import settings
from django.contrib.sessions.backends.base import SessionBase
from django.utils.module_loading import import_string

__all__ = ("SocketSessionMiddleware", "session_store", "socket_auth_stack")


def session_store(session_key: str | None) -> SessionBase:
    """The configured engine's session of `session_key`; it is read from storage on first use."""
    store: type[SessionBase] = import_string(f"{settings.SESSION_ENGINE}.SessionStore")
    return store(session_key)


class SocketSessionMiddleware(BaseMiddleware):
    """`scope["session"]` from the session cookie (`CookieMiddleware` must be above it)."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        scope = {**scope, "session": session_store(scope["cookies"].get(settings.SESSION_COOKIE_NAME))}
        return await self.inner(scope, receive, send)


def socket_auth_stack(inner: Any) -> CookieMiddleware:
    """Channels' `AuthMiddlewareStack` for sockets that never write the session."""
    return CookieMiddleware(SocketSessionMiddleware(AuthMiddleware(inner)))
