"""Each sweeper notes its last completed pass in Redis, so /health/ can tell whether recovery is running.

One key per sweeper process (`harness:sweeper:<host>:<pid>`), expiring on its own: a sweeper that died
disappears from the report instead of being counted forever, and a Redis restart forgets nothing the next
pass (2 s later) does not write again.
"""

from __future__ import annotations

import os
import socket
from datetime import datetime

import django_rq
from django.utils import timezone
from redis import Redis

__all__ = ("last_passes", "record_pass")

KEY_PREFIX = "harness:sweeper:"
KEY_TTL_SECONDS = 600


def _connection() -> Redis:
    return django_rq.get_connection("default")


def record_pass(at: datetime | None = None) -> None:
    at = at or timezone.now()
    name = f"{socket.gethostname()}:{os.getpid()}"
    _connection().set(f"{KEY_PREFIX}{name}", at.isoformat(), ex=KEY_TTL_SECONDS)


def last_passes() -> dict[str, datetime]:
    """When each sweeper seen in the last `KEY_TTL_SECONDS` finished its last pass, by `<host>:<pid>`."""
    connection = _connection()
    keys = list(connection.scan_iter(match=f"{KEY_PREFIX}*", count=100))
    values = connection.mget(keys) if keys else []
    return {
        key.decode()[len(KEY_PREFIX) :]: datetime.fromisoformat(value if isinstance(value, str) else value.decode())
        for key, value in zip(keys, values, strict=True)
        if value is not None
    }
