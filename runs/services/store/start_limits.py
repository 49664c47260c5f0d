"""How many starts of work a user, and an API token, may make per minute, so no one can queue unbounded work.

A fixed window of one minute, counted in Django's cache (`CACHES`; per web process unless that points at a shared
cache such as Redis). A refused start counts too, so retrying at once does not help; a repeated post of the same
form is not a new start and is never counted (`starts`). 0 turns a limit off.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from django.conf import settings
from django.core.cache import cache

__all__ = ("StartLimited", "count_start")

WINDOW_SECONDS = 60

# Where the window's minute comes from; tests hold it still so their window cannot turn between two starts.
clock: Callable[[], float] = time.time


class StartLimited(Exception):
    """Too many starts in this minute; `message` is meant for the user, `retry_after` is in seconds."""

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after = retry_after


def count_start(user_pk: int, *, token_pk: int | None = None) -> None:
    """Count one start by the user (through the token, if one); `StartLimited` when a window is already full."""
    now = clock()
    window = int(now // WINDOW_SECONDS)
    retry_after = WINDOW_SECONDS - int(now % WINDOW_SECONDS)
    windows = [("user", f"user-{user_pk}", settings.HARNESS_STARTS_PER_MINUTE)]
    if token_pk is not None:
        windows.append(("API token", f"token-{token_pk}", settings.HARNESS_TOKEN_STARTS_PER_MINUTE))
    for who, counter, limit in windows:
        if limit and _counted(f"harness:starts:{counter}:{window}") > limit:
            raise StartLimited(
                f"This {who} has started {limit} executions in this minute, the most allowed; nothing was started. "
                f"Try again in {retry_after} seconds.",
                retry_after,
            )


def _counted(key: str) -> int:
    """The window's count after this start; the key outlives its minute by one, then the cache drops it."""
    cache.add(key, 0, timeout=2 * WINDOW_SECONDS)
    try:
        return cache.incr(key)
    except ValueError:
        # Dropped between the two calls (evicted, or the window just expired): this start opens it again.
        cache.add(key, 1, timeout=2 * WINDOW_SECONDS)
        return 1
