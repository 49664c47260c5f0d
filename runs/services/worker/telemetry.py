"""OpenTelemetry for runs, off unless `HARNESS_OTEL_ENABLED`: pydantic-ai's own spans (the agent run, each model
request, each tool call), tagged with the run's ids, masked by its execution's policy and exported over OTLP.

The exporter reads the standard `OTEL_EXPORTER_OTLP_*` variables (endpoint, headers, timeout) and the batch
processor the `OTEL_BSP_*` ones. A span is stamped with its run's ids as it starts; ended spans wait in the batch
processor's bounded queue (full: spans are dropped), and its own thread masks each with the redactor of the run it
began in, then sends them. So nothing unmasked leaves the process, a span that began outside a run is dropped, and a
collector that is down or slow never holds up or fails a run.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from functools import cache
from typing import Any
from weakref import WeakKeyDictionary

from django.conf import settings
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import Status
from opentelemetry.util.types import AttributeValue
from pydantic_ai.capabilities import AbstractCapability, Instrumentation
from pydantic_ai.models.instrumented import InstrumentationSettings

from runs.models import Run

from ..timeline import Redactor, redactor_for

__all__ = (
    "RUN_ID_ATTRIBUTES",
    "MaskingExporter",
    "RunSpanProcessor",
    "RunTracing",
    "process_tracing",
    "run_capabilities",
    "traced",
)

log = logging.getLogger(__name__)

EXECUTION_ID = "harness.execution_id"
RUN_ID = "harness.run_id"
THREAD_ID = "harness.thread_id"
RUN_ID_ATTRIBUTES = frozenset({EXECUTION_ID, RUN_ID, THREAD_ID})


@dataclass(frozen=True, slots=True)
class _RunScope:
    attributes: dict[str, AttributeValue]
    redactor: Redactor


# The run whose code is executing: its tasks (the stream's producer, tool calls) copy it when they are created.
_current_run: ContextVar[_RunScope | None] = ContextVar("harness_traced_run", default=None)


class RunSpanProcessor(SpanProcessor):
    """Stamps a span with the ids of the run it begins in, and hands that run's redactor on to `MaskingExporter`
    with the ended span (a copy the processors share, not the span that started)."""

    def __init__(self, redactors: WeakKeyDictionary[ReadableSpan, Redactor]) -> None:
        self._redactors = redactors
        self._open: dict[int, Redactor] = {}

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        scope = _current_run.get()
        if scope is None:
            return
        span.set_attributes(scope.attributes)
        self._open[span.get_span_context().span_id] = scope.redactor

    def on_end(self, span: ReadableSpan) -> None:
        redactor = None if span.context is None else self._open.pop(span.context.span_id, None)
        if redactor is not None:
            self._redactors[span] = redactor


class MaskingExporter(SpanExporter):
    """Masks each span with the redactor of its run before `exporter` sends it; drops a span of no run.

    It runs on the batch processor's thread: masking reads the whole history a model request span carries, far
    too long to hold up the event loop the runs share."""

    def __init__(self, exporter: SpanExporter, redactors: WeakKeyDictionary[ReadableSpan, Redactor]) -> None:
        self._exporter = exporter
        self._redactors = redactors

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        masked = []
        for span in spans:
            redactor = self._redactors.get(span)
            if redactor is None:
                continue
            try:
                masked.append(_masked(span, redactor))
            except Exception:
                log.exception("span %r dropped: masking failed", span.name)
        return self._exporter.export(masked) if masked else SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self._exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._exporter.force_flush(timeout_millis)


def _masked(span: ReadableSpan, redactor: Redactor) -> ReadableSpan:
    """A copy of an ended span with its attributes, events' attributes and status text masked as the timeline is."""
    if not redactor:
        return span
    status = span.status
    if status.description:
        status = Status(status.status_code, redactor.text(status.description))
    return ReadableSpan(
        name=span.name,
        context=span.context,
        parent=span.parent,
        resource=span.resource,
        attributes=redactor.value(dict(span.attributes or {}), keep=RUN_ID_ATTRIBUTES),
        events=[
            Event(event.name, redactor.value(dict(event.attributes or {})), event.timestamp) for event in span.events
        ],
        links=span.links,
        kind=span.kind,
        status=status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


class RunTracing:
    """A tracer provider whose spans are stamped as they start, then batched, masked and sent by `exporter`."""

    def __init__(self, exporter: SpanExporter) -> None:
        # Its own provider, not the global one: only runs' spans, masked, go to the collector.
        # Weak: a span the batch queue drops when full takes its entry with it.
        redactors: WeakKeyDictionary[ReadableSpan, Redactor] = WeakKeyDictionary()
        self.provider = TracerProvider(resource=_resource())
        self.provider.add_span_processor(RunSpanProcessor(redactors))
        self.provider.add_span_processor(BatchSpanProcessor(MaskingExporter(exporter, redactors)))
        # Binary parts would go as base64, which masking cannot read.
        self.settings = InstrumentationSettings(tracer_provider=self.provider, include_binary_content=False)


def _resource() -> Resource:
    """What `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES` say, named `harness-host` unless they name it."""
    detected = Resource.create()
    if str(detected.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        return detected.merge(Resource({SERVICE_NAME: "harness-host"}))
    return detected


@cache
def process_tracing() -> RunTracing:
    """This process's pipeline, made on first use: OTLP over HTTP to the endpoint the OTEL variables name."""
    return RunTracing(OTLPSpanExporter())


def run_capabilities() -> list[AbstractCapability[Any]]:
    """pydantic-ai's instrumentation for a run's agent, when the setting turns it on."""
    if not settings.HARNESS_OTEL_ENABLED:
        return []
    try:
        tracing = process_tracing()
    except Exception:
        # A pipeline the OTEL variables cannot make (a queue of -5 spans, say) costs the spans, not the run.
        log.exception("OpenTelemetry is on but its exporter cannot be made: this run sends no spans")
        return []
    return [Instrumentation(settings=tracing.settings)]


@contextlib.contextmanager
def traced(run: Run) -> Iterator[None]:
    """Spans that begin inside carry `run`'s ids and are masked by its policy version (when telemetry is on).

    `run.run_id` is the engine's id, so enter this once the stream exists and before it starts its tasks."""
    if not settings.HARNESS_OTEL_ENABLED:
        yield
        return
    attributes: dict[str, AttributeValue] = {
        EXECUTION_ID: run.execution_id,
        RUN_ID: run.run_id,
        THREAD_ID: run.execution.thread.thread_id,
    }
    token = _current_run.set(_RunScope(attributes, redactor_for(run.policy_version)))
    try:
        yield
    finally:
        _current_run.reset(token)
