"""A small OpenAI-compatible chat-completions server for tests: real HTTP and SSE on loopback.

It plays a two-step tool-using model: a request whose conversation has no tool result yet is answered with a
streamed call of `tool_name`; a request that carries the tool's result is answered with streamed text. It can
also refuse every request with an HTTP status, as a provider with a wrong key or a rate limit would.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ANSWER_CHUNKS = ("Record ", "REC-42 ", "is active.")
USAGE = {"prompt_tokens": 57, "completion_tokens": 11, "total_tokens": 68}


@dataclass
class ProviderScript:
    tool_name: str = "lookup_record"
    tool_args_chunks: tuple[str, ...] = ('{"record_id": ', '"REC-42"}')
    # Refuse every request with this status and error body instead of answering.
    refuse_with: int | None = None
    requests: list[dict[str, Any]] = field(default_factory=list)
    authorizations: list[str] = field(default_factory=list)


class OpenAICompatibleServer:
    def __init__(self, script: ProviderScript | None = None) -> None:
        self.script = script or ProviderScript()
        handler = type("Handler", (_Handler,), {"script": self.script})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> OpenAICompatibleServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


class _Handler(BaseHTTPRequestHandler):
    script: ProviderScript
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # the test output stays readable
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.script.requests.append(body)
        self.script.authorizations.append(self.headers.get("Authorization", ""))
        if self.path != "/v1/chat/completions":
            return self._error(404, "not_found", f"No route {self.path}")
        if self.script.refuse_with is not None:
            status = self.script.refuse_with
            code = {401: "invalid_api_key", 429: "rate_limit_exceeded"}.get(status, "server_error")
            return self._error(status, code, f"Refused by the test server ({status})")
        answered = any(message.get("role") == "tool" for message in body["messages"])
        self._stream(body, self._text_deltas() if answered else self._tool_call_deltas())

    def _tool_call_deltas(self) -> list[tuple[dict[str, Any], str | None]]:
        opening = {
            "role": "assistant",
            "tool_calls": [
                {"index": 0, "id": "call_0", "type": "function", "function": {"name": self.script.tool_name}}
            ],
        }
        deltas: list[tuple[dict[str, Any], str | None]] = [(opening, None)]
        for chunk in self.script.tool_args_chunks:
            deltas.append(({"tool_calls": [{"index": 0, "function": {"arguments": chunk}}]}, None))
        return [*deltas, ({}, "tool_calls")]

    def _text_deltas(self) -> list[tuple[dict[str, Any], str | None]]:
        deltas: list[tuple[dict[str, Any], str | None]] = [({"role": "assistant", "content": ""}, None)]
        deltas += [({"content": chunk}, None) for chunk in ANSWER_CHUNKS]
        return [*deltas, ({}, "stop")]

    def _stream(self, request: dict[str, Any], deltas: list[tuple[dict[str, Any], str | None]]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        base = {"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 0, "model": request["model"]}
        for delta, finish_reason in deltas:
            choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
            self._send_event({**base, "choices": [choice]})
        if request.get("stream_options", {}).get("include_usage"):
            self._send_event({**base, "choices": [], "usage": USAGE})
        self._send_chunk(b"data: [DONE]\n\n")
        self._send_chunk(b"")

    def _send_event(self, payload: dict[str, Any]) -> None:
        self._send_chunk(f"data: {json.dumps(payload)}\n\n".encode())

    def _send_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _error(self, status: int, code: str, message: str) -> None:
        payload = json.dumps({"error": {"message": message, "type": "test_error", "code": code}}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        # Tells the SDK's retry loop to come back at once, so a retried 429 costs the test no time.
        self.send_header("retry-after-ms", "1")
        self.end_headers()
        self.wfile.write(payload)
