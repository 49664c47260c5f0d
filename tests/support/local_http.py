"""A real HTTP server on a free local port, serving from a daemon thread for the length of a `with`: what the
stand-ins for a team's webhook endpoint and an OpenTelemetry collector are built on.

Their handlers may hold a request until `released` is set, which the end of the `with` does.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self

POLL_SECONDS = 0.02


class QuietHandler(BaseHTTPRequestHandler):
    """Logs nothing: the tests say what they received."""

    def log_message(self, format: str, *args: object) -> None:
        pass


class LocalHttpServer:
    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.released = threading.Event()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        # shutdown() waits until the serving loop next looks: at the default half second, each test waited that long.
        self._thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": POLL_SECONDS}, daemon=True
        )

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()
