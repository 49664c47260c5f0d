"""Whether the parts the dashboard depends on are up: the database, Redis and at least one RQ worker.

Operators see the worker state in the top bar (a dashboard whose runs silently queue forever is worse than one
that says "no worker"); `/health/` answers monitors with JSON and 503 when something is down.
"""

from __future__ import annotations

from django.db import connection
from django.http import HttpRequest, JsonResponse
from django_rq import get_connection
from redis.exceptions import RedisError
from rq import Worker


def _worker_count() -> int | None:
    """Number of live RQ workers, or None when Redis cannot be reached."""
    try:
        return Worker.count(connection=get_connection("default"))
    except RedisError:
        return None


def worker_status(request: HttpRequest) -> dict:
    if not request.user.is_authenticated:
        return {}
    return {"worker_count": _worker_count()}


def health(request: HttpRequest) -> JsonResponse:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        database_ok = True
    except Exception:
        database_ok = False
    workers = _worker_count()
    ok = database_ok and workers is not None and workers > 0
    body = {"database": database_ok, "redis": workers is not None, "workers": workers or 0}
    return JsonResponse(body, status=200 if ok else 503)
