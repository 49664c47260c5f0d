"""Websocket routes of the timeline; the consumers live in observers/consumers.py."""

from django.urls import path, re_path

from observers import consumers
from observers.authenticated import NoSuchSocketConsumer

websocket_urlpatterns = [
    # django-stubs types a route's view as an HTTP view; Channels routes ASGI consumers with the same `path`.
    path("ws/executions/<int:pk>/", consumers.ExecutionTimelineConsumer.as_asgi()),  # type: ignore[arg-type]
    path("ws/threads/", consumers.ThreadListConsumer.as_asgi()),  # type: ignore[arg-type]
    path("ws/approvals/", consumers.ApprovalsConsumer.as_asgi()),  # type: ignore[arg-type]
    # Last: any other path (a negative or non-numeric pk) closes with 4404, not a failed handshake; ignored as above.
    re_path(r"", NoSuchSocketConsumer.as_asgi()),  # type: ignore[arg-type]
]
