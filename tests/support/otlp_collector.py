"""A stand-in for an OpenTelemetry collector: a real HTTP server on a free local port that takes OTLP/HTTP trace
exports (`POST /v1/traces`, protobuf), decodes each `ExportTraceServiceRequest` and keeps its spans.

`holding=True` makes a slow collector: it reads and records each export, then keeps the request open, unanswered,
until `released` is set (at the latest by the end of the `with`).
"""

from __future__ import annotations

import gzip
import threading
from dataclasses import dataclass
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from tests.support.local_http import LocalHttpServer, QuietHandler

# Longer than any test waits with a held export; the collector lets go at the end of the test anyway.
HOLD_SECONDS = 120.0


@dataclass(frozen=True)
class ReceivedSpan:
    name: str
    attributes: dict[str, Any]
    service: str

    def text(self) -> str:
        """Every attribute value as one string, to look for what must never arrive."""
        return " ".join(str(value) for value in self.attributes.values())


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        return {item.key: _value(item.value) for item in value.kvlist_value.values}
    return None if kind is None else getattr(value, kind)


def decode(body: bytes) -> list[ReceivedSpan]:
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    spans = []
    for resource_spans in request.resource_spans:
        resource = {item.key: _value(item.value) for item in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                attributes = {item.key: _value(item.value) for item in span.attributes}
                spans.append(ReceivedSpan(span.name, attributes, str(resource.get("service.name", ""))))
    return spans


class OtlpCollector(LocalHttpServer):
    def __init__(self, *, holding: bool = False) -> None:
        self.exports = 0
        self.answered = 0
        self._spans: list[ReceivedSpan] = []
        self._lock = threading.Lock()
        collector = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                spans = decode(body) if self.path == "/v1/traces" else []
                with collector._lock:
                    collector.exports += 1
                    collector._spans += spans
                collector.released.wait(HOLD_SECONDS)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200 if self.path == "/v1/traces" else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)
                with collector._lock:
                    collector.answered += 1

        super().__init__(Handler)
        if not holding:
            self.released.set()

    @property
    def spans(self) -> list[ReceivedSpan]:
        with self._lock:
            return list(self._spans)

    def named(self, name: str) -> list[ReceivedSpan]:
        return [span for span in self.spans if span.name == name]
