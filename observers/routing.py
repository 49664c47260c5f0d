"""Websocket routes of the timeline; the consumers live in observers/consumers.py."""

websocket_urlpatterns: list = []
