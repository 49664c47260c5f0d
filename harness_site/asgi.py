"""ASGI entry point: Django for HTTP, Channels for the timeline websockets."""

import gc
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "harness_site.settings")
# Sockets make many short database calls (a replay page, a status, a catch-up); opening a connection for each
# cost more than the query. The web process keeps its connections unless told otherwise.
os.environ.setdefault("DATABASE_CONN_MAX_AGE", "600")

# Django must be set up before anything imports models (the consumers do).
django_asgi_app = get_asgi_application()

from runs.checks import refuse_bad_settings  # noqa: E402

# daphne runs no management command, so no system check: refuse a bad setting (or the demo password) here instead.
refuse_bad_settings()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.conf import settings  # noqa: E402

from harness_site import eager_writes  # noqa: E402
from harness_site.proxied_clients import ProxiedClients  # noqa: E402
from observers.routing import websocket_urlpatterns  # noqa: E402
from observers.socket_sessions import socket_auth_stack  # noqa: E402

application: ProtocolTypeRouter | ProxiedClients = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": AllowedHostsOriginValidator(
            # types-channels wants the routes typed as Channels' own; django-stubs types them as HTTP routes.
            socket_auth_stack(URLRouter(websocket_urlpatterns))  # type: ignore[arg-type]
        ),
    }
)
if settings.HARNESS_BEHIND_TLS_PROXY:
    application = ProxiedClients(application, trusted=settings.HARNESS_TRUSTED_PROXIES)

# A live message goes to every viewer's socket in turn; each write is sent at once instead of a loop round later.
eager_writes.install()

# Everything loaded so far (Django, the models, pydantic-ai, the consumers) lives as long as the process; frozen,
# the collector stops walking it on every full collection. With hundreds of open sockets a full collection
# otherwise paused daphne's event loop for 130–165 ms, long enough to show in the viewers benchmark's p99
# (BENCHMARKS.md, viewers); frozen, 16–30 ms.
gc.freeze()
