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

from runs.services.store import session_store

__all__ = ("SocketSessionMiddleware", "socket_auth_stack")


class SocketSessionMiddleware(BaseMiddleware):
    """`scope["session"]` from the session cookie (`CookieMiddleware` must be above it)."""

    # types-channels types the scope as a stub-only TypedDict and `inner` as an ASGI 2 or 3 application; Channels
    # calls `inner` ASGI 3 style, with the scope as a plain dict, as here.
    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:  # type: ignore[override]
        scope = {**scope, "session": session_store(scope["cookies"].get(settings.SESSION_COOKIE_NAME))}
        return await self.inner(scope, receive, send)  # type: ignore[arg-type,call-arg,misc]  # ASGI 3, as above


def socket_auth_stack(inner: Any) -> CookieMiddleware:
    """Channels' `AuthMiddlewareStack` for sockets that never write the session."""
    return CookieMiddleware(SocketSessionMiddleware(AuthMiddleware(inner)))
