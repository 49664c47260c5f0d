"""Websocket routes of the timeline; the consumers live in observers/consumers.py."""

from django.urls import path, re_path

from observers import consumers
from observers.authenticated import NoSuchSocketConsumer

websocket_urlpatterns = [
    path("ws/executions/<int:pk>/", consumers.ExecutionTimelineConsumer.as_asgi()),
    path("ws/threads/", consumers.ThreadListConsumer.as_asgi()),
    path("ws/approvals/", consumers.ApprovalsConsumer.as_asgi()),
    # Last: any other path (a negative or non-numeric pk) is closed with 4404 rather than failing the handshake.
    re_path(r"", NoSuchSocketConsumer.as_asgi()),
]
