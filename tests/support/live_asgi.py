"""The Host's ASGI application as the test daphnes serve it.

Tests flush the database these daphnes share between tests, and SQLite's AUTOINCREMENT gives the content types
created again after a flush new ids. A long-lived daphne would keep the old ones in ContentTypeManager's cache, and
the admin's log entries would then point at rows that are gone. A real Host never flushes; here every HTTP request
starts with an empty content type cache, as a fresh process would.
"""

from __future__ import annotations

from typing import Any

from harness_site.asgi import application as host_application


async def application(scope: Any, receive: Any, send: Any) -> None:
    if scope["type"] == "http":
        # Imported here: the app registry is ready only once harness_site.asgi has set Django up.
        from django.contrib.contenttypes.models import ContentType

        ContentType.objects.clear_cache()
    await host_application(scope, receive, send)
