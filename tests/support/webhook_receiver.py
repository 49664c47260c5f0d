"""A real HTTP server on a free local port that receives webhooks as a team's endpoint would, and misbehaves on demand.

Paths choose the behaviour: `/ok` answers 204, `/fail` 500, `/slow` waits longer than any test's timeout before
answering, `/loop` redirects to itself forever. Every request is recorded (path, headers, body, when) and checked
against the secret the way a receiver should: the HMAC of `<timestamp>.<body>`, with a fresh timestamp.
"""

from __future__ import annotations

import hashlib
import hmac
import threading
import time
from dataclasses import dataclass, field

from tests.support.local_http import LocalHttpServer, QuietHandler

SLOW_SECONDS = 5.0
# A receiver refuses a timestamp older than this: a recorded delivery cannot be played again later.
REPLAY_WINDOW_SECONDS = 300


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    # When the request had been read (time.perf_counter, so a benchmark in this process can time deliveries).
    at: float = field(default_factory=time.perf_counter)

    def signed_by(self, secret: str, *, now: float | None = None) -> bool:
        timestamp = self.headers.get("x-harness-timestamp", "")
        if not timestamp.isdigit() or abs((now or time.time()) - int(timestamp)) > REPLAY_WINDOW_SECONDS:
            return False
        expected = hmac.new(secret.encode(), f"{timestamp}.".encode() + self.body, hashlib.sha256).hexdigest()
        return hmac.compare_digest(self.headers.get("x-harness-signature", ""), f"sha256={expected}")


class WebhookReceiver(LocalHttpServer):
    def __init__(self) -> None:
        self.received: list[Received] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with receiver._lock:
                    headers = {name.lower(): value for name, value in self.headers.items()}
                    receiver.received.append(Received(self.path, headers, body))
                if self.path == "/slow":
                    receiver.released.wait(SLOW_SECONDS)
                if self.path == "/loop":
                    self.send_response(307)
                    self.send_header("Location", "/loop")
                elif self.path == "/fail":
                    self.send_response(500)
                else:
                    self.send_response(204)
                self.send_header("Content-Length", "0")
                self.end_headers()

        super().__init__(Handler)

    def to_path(self, path: str, *, after: int = 0) -> list[Received]:
        """The requests to `path` among those received after the first `after` (a benchmark's repetition)."""
        with self._lock:
            return [request for request in self.received[after:] if request.path == path]

    def of_event(self, event: str) -> list[Received]:
        with self._lock:
            return [request for request in self.received if request.headers.get("x-harness-event") == event]
