"""Websocket messages of any size: a message over the transport's limit travels as numbered pieces.

daphne (autobahn) refuses to send a websocket message over 1 MiB (`websocket_max_message_size`) and only logs
it, so a viewer would wait forever for a large replay page or a large event. A text over `PIECE_CHARS` is
therefore sent as `{"type": "piece", "id", "index", "count", "data"}` messages; the page's socket
(`static/js/socket.js`) joins the `data` of one `id` in order and handles the result as one message.
"""

from __future__ import annotations

import json

__all__ = ("PIECE_CHARS", "pieces")

# The text is ASCII (JSON with `ensure_ascii`); quoting a piece as a JSON string at most doubles it, which
# keeps every piece well under 1 MiB.
PIECE_CHARS = 256 * 1024


def pieces(text: str, message_id: int) -> list[str]:
    """`text` itself if it is small enough, else the piece messages that carry it."""
    if len(text) <= PIECE_CHARS:
        return [text]
    chunks = [text[start : start + PIECE_CHARS] for start in range(0, len(text), PIECE_CHARS)]
    return [
        json.dumps({"type": "piece", "id": message_id, "index": index, "count": len(chunks), "data": chunk})
        for index, chunk in enumerate(chunks)
    ]
