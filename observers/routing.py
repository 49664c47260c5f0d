"""Websocket routes of the timeline; the consumers live in observers/consumers.py."""

from django.urls import path

from observers import consumers

websocket_urlpatterns = [
    path("ws/executions/<int:pk>/", consumers.ExecutionTimelineConsumer.as_asgi()),
    path("ws/threads/", consumers.ThreadListConsumer.as_asgi()),
]
