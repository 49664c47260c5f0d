"""A channel layer that keeps every group message it is given, for tests that check what the Host publishes.

Selected through the CHANNEL_LAYERS setting, so the Host's own publishing path (its event loop thread, the
layer lookup, the error handling around each send) runs as in production up to the layer itself.
"""

from __future__ import annotations

from typing import Any

from channels.layers import InMemoryChannelLayer

BACKEND = "tests.support.recording_layer.RecordingChannelLayer"


class RecordingChannelLayer(InMemoryChannelLayer):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.sent: list[tuple[str, dict[str, Any]]] = []

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        self.sent.append((group, message))
        await super().group_send(group, message)
