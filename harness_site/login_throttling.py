"""The username and address django-axes counts failures under.

The username is taken from what the login form posted. Axes reads the raw POST when the form refused the
username, and stores it in a 255-character column: a megabyte or a NUL from a hostile form would fail in
PostgreSQL. Cut to the longest username Django allows and without control characters, it still names the account
being guessed.

The address is the connection's (`REMOTE_ADDR`), which behind the TLS proxy harness_site/proxied_clients.py has
already set to the client's; forwarding headers are never read here.
"""

from __future__ import annotations

import unicodedata
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Field
from django.http import HttpRequest


def throttled_username(request: HttpRequest, credentials: dict[str, Any] | None) -> str | None:
    field = get_user_model().USERNAME_FIELD
    raw = (credentials or {}).get("username") or getattr(request, "POST", {}).get(field)
    if raw is None:
        return None
    username = get_user_model()._meta.get_field(field)
    assert isinstance(username, Field)  # the USERNAME_FIELD is a column, not a relation
    limit = username.max_length
    return "".join(char for char in str(raw) if unicodedata.category(char) != "Cc")[:limit]


def client_address(request: HttpRequest) -> str | None:
    address: str | None = request.META.get("REMOTE_ADDR")
    return address
