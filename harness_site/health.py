"""Whether the parts the dashboard depends on are up: database, Redis, RQ workers, the sweeper, the queue.

Operators see the worker state in the top bar (a dashboard whose runs silently queue forever is worse than one
that says "no worker"); `/health/` answers monitors with JSON, one entry per part with its own `status`
("ok" or what is wrong), and 503 when any part is not ok. The endpoint is public, so a failing part says only a
fixed reason code; the exception, which names hosts, ports and database users, goes to the log.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.db import DatabaseError, OperationalError, connection
from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from django_rq import get_connection, get_queue
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError
from rq import Worker

from runs.services.recovery import last_passes
from runs.services.store import queue_reachable
from runs.services.worker import loop_lag

log = logging.getLogger(__name__)

Check = dict[str, Any]
UNKNOWN: Check = {"status": "unknown", "reason": "Redis is unreachable"}


def _worker_count() -> int | None:
    """Number of live RQ workers, or None when Redis cannot be reached."""
    try:
        return Worker.count(connection=get_connection("default"))
    except RedisError:
        return None


def worker_status(request: HttpRequest) -> dict[str, int | None]:
    if not request.user.is_authenticated:
        return {}
    # While the cached check knows Redis is down, asking it again would only slow every page down.
    return {"worker_count": _worker_count() if queue_reachable() else None}


def _database() -> Check:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except DatabaseError as error:
        return _down("database", error, unreachable=isinstance(error, OperationalError))
    return {"status": "ok", "vendor": connection.vendor}


def _redis() -> Check:
    try:
        get_connection("default").ping()
    except RedisError as error:
        return _down("Redis", error, unreachable=isinstance(error, RedisConnectionError | RedisTimeoutError))
    return {"status": "ok"}


def _down(part: str, error: Exception, *, unreachable: bool) -> Check:
    """A failed part: the error is logged (one line, as monitors ask often), the answer says only a fixed code."""
    log.warning("/health/: the %s check failed: %s", part, error)
    return {"status": "down", "reason": "unreachable" if unreachable else "error"}


def _workers() -> Check:
    """Live workers, and how late their event loops woke the runs' heartbeats (the worst since each one's last
    heartbeat): a worker whose loop lags is starving its runs. Lag alone does not fail the check."""
    try:
        connection = get_connection("default")
        keys = Worker.all_keys(connection=connection)
        lags = [float(connection.hget(key, loop_lag.REGISTRATION_FIELD) or 0) for key in keys]
    except RedisError:
        return UNKNOWN
    return {
        "status": "ok" if keys else "none",
        "count": len(keys),
        "loop_lag": max(lags, default=0.0),
        "lagging": sum(lag > loop_lag.WARN_SECONDS for lag in lags),
    }


def _sweeper() -> Check:
    """The most recent completed pass of any sweeper; stale when older than a few of its intervals."""
    try:
        passes = last_passes()
    except RedisError:
        return UNKNOWN
    if not passes:
        return {"status": "none", "sweepers": 0}
    latest = max(passes.values())
    age = (timezone.now() - latest).total_seconds()
    stale = age > settings.HARNESS_HEALTH_SWEEPER_STALE_SECONDS
    return {"status": "stale" if stale else "ok", "sweepers": len(passes), "last_pass": latest.isoformat(), "age": age}


def _queue() -> Check:
    try:
        depth = get_queue("default").count
    except RedisError:
        return UNKNOWN
    return {"status": "backlog" if depth > settings.HARNESS_HEALTH_QUEUE_LIMIT else "ok", "depth": depth}


def health(request: HttpRequest) -> JsonResponse:
    checks = {
        "database": _database(),
        "redis": _redis(),
        "workers": _workers(),
        "sweeper": _sweeper(),
        "queue": _queue(),
    }
    ok = all(check["status"] == "ok" for check in checks.values())
    return JsonResponse({"status": "ok" if ok else "failing", **checks}, status=200 if ok else 503)
