"""ASGI entry point: Django for HTTP, Channels for the timeline websockets."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "harness_site.settings")
# Sockets make many short database calls (a replay page, a status, a catch-up); opening a connection for each
# cost more than the query. The web process keeps its connections unless told otherwise.
os.environ.setdefault("DATABASE_CONN_MAX_AGE", "600")

# Django must be set up before anything imports models (the consumers do).
django_asgi_app = get_asgi_application()

from django.conf import settings  # noqa: E402

from runs.checks import refuse_bad_settings  # noqa: E402

# daphne runs no management command, so no system check: refuse a bad setting here instead.
refuse_bad_settings()
if settings.PRODUCTION:
    from runs.demo_operator import refuse_demo_password

    refuse_demo_password()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from observers.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
