"""Login sessions outside the request that opened them: open websockets and SSE streams outlive it, and check
again from time to time that their session still authenticates the same user."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import auth
from django.contrib.sessions.backends.base import SessionBase
from django.http import HttpRequest
from django.utils.module_loading import import_string

__all__ = ("session_store", "session_user_pk")


def session_store(session_key: str | None) -> SessionBase:
    """The configured engine's session of `session_key`; it is read from storage on first use."""
    store: type[SessionBase] = import_string(f"{settings.SESSION_ENGINE}.SessionStore")
    return store(session_key)


def session_user_pk(session_key: str) -> Any:
    """The pk of the user this session still authenticates, or None; Django's own checks, hash included (so a
    logout, an expiry or a password change all end it)."""
    request = HttpRequest()
    request.session = session_store(session_key)
    user = auth.get_user(request)
    return user.pk if user.is_authenticated else None
