"""OpenTelemetry for runs, in this process: the real runner and demo agent, spans caught by an in-memory exporter
behind the Host's own processors (ids stamped, masking, batching)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from runs.models import Execution, ExecutionStatus
from runs.services.lifecycle import executions
from runs.services.timeline import REDACTED
from runs.services.worker import runner, telemetry
from tests.support import factories
from tests.support.host_runs import DEMO_TOOLS

pytestmark = pytest.mark.django_db

SECRET = "hunter2-in-the-prompt"
# The demo searches the records for the prompt itself, so the secret is in a tool argument and result too.
PROMPT = f"look up REC-7 for password={SECRET}"


@pytest.fixture
def exported(settings, monkeypatch) -> Iterator[InMemorySpanExporter]:
    settings.HARNESS_OTEL_ENABLED = True
    exporter = InMemorySpanExporter()
    tracing = telemetry.RunTracing(exporter)
    monkeypatch.setattr(telemetry, "process_tracing", lambda: tracing)
    yield exporter
    tracing.provider.shutdown()


def run_demo(prompt: str) -> Execution:
    execution = executions.start_execution(factories.thread(model="demo", tools=DEMO_TOOLS), prompt)
    runner.execute_run(execution.runs.get().pk)
    execution.refresh_from_db()
    return execution


def finished(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    assert telemetry.process_tracing().provider.force_flush()
    return list(exporter.get_finished_spans())


def text_of(span: ReadableSpan) -> str:
    return json.dumps(dict(span.attributes or {}))


def test_every_span_of_a_run_carries_its_ids_and_its_content_masked(exported):
    factories.configure_policy(redact_patterns=["password"])
    execution = run_demo(PROMPT)
    assert execution.status == ExecutionStatus.COMPLETED
    run = execution.runs.get()

    spans = finished(exported)
    names = [span.name for span in spans]
    # The agent run, a request for the two calls, the calls, and a request for the answer.
    assert f"invoke_agent {execution.thread.profile.name}" in names
    assert names.count("chat demo-scripted") == 2
    assert {"execute_tool lookup_record", "execute_tool search_records"} <= set(names)
    for span in spans:
        attributes = span.attributes or {}
        assert attributes["harness.execution_id"] == execution.pk
        assert attributes["harness.run_id"] == run.run_id
        assert attributes["harness.thread_id"] == execution.thread.thread_id

    assert not [span.name for span in spans if SECRET in text_of(span)]
    [search] = [span for span in spans if span.name == "execute_tool search_records"]
    assert json.loads(search.attributes["gen_ai.tool.call.arguments"]) == {
        "query": f"look up REC-7 for password={REDACTED}"
    }
    first_request = next(span for span in spans if span.name == "chat demo-scripted")
    assert f"password={REDACTED}" in first_request.attributes["gen_ai.input.messages"]


def test_a_policy_without_patterns_sends_the_content_as_it_is(exported):
    run_demo(PROMPT)
    assert any(SECRET in text_of(span) for span in finished(exported))


def test_telemetry_is_off_by_default_and_a_run_then_makes_no_span(settings, exported):
    settings.HARNESS_OTEL_ENABLED = False
    assert telemetry.run_capabilities() == []
    assert run_demo(PROMPT).status == ExecutionStatus.COMPLETED
    assert finished(exported) == []


def test_a_span_begun_outside_a_run_is_never_sent(exported):
    tracer = telemetry.process_tracing().provider.get_tracer("elsewhere")
    with tracer.start_as_current_span("not a run's", attributes={"prompt": f"password={SECRET}"}):
        pass
    assert finished(exported) == []


def test_a_span_that_cannot_be_masked_is_dropped_and_the_run_goes_on(exported, monkeypatch):
    factories.configure_policy(redact_patterns=["password"])

    def broken(*args, **kwargs):
        raise RuntimeError("masking broke")

    monkeypatch.setattr(telemetry, "_masked", broken)
    assert run_demo(PROMPT).status == ExecutionStatus.COMPLETED
    assert finished(exported) == []


def test_an_exporter_the_environment_cannot_make_costs_the_spans_not_the_run(settings, monkeypatch):
    settings.HARNESS_OTEL_ENABLED = True
    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "-5")
    telemetry.process_tracing.cache_clear()
    try:
        assert telemetry.run_capabilities() == []
        assert run_demo(PROMPT).status == ExecutionStatus.COMPLETED
    finally:
        telemetry.process_tracing.cache_clear()


def test_spans_are_masked_by_the_batch_export_not_by_the_run_that_ends_them(settings, monkeypatch):
    """Masking reads a model request's whole history: on the run's event loop, every run of the worker would wait."""
    settings.HARNESS_OTEL_ENABLED = True
    # No batch is due during the run: it would go only when this test flushes it.
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "600000")
    exporter = InMemorySpanExporter()
    tracing = telemetry.RunTracing(exporter)
    monkeypatch.setattr(telemetry, "process_tracing", lambda: tracing)
    factories.configure_policy(redact_patterns=["password"])
    masked: list[str] = []
    real = telemetry._masked

    def counting(span, redactor):
        masked.append(span.name)
        return real(span, redactor)

    monkeypatch.setattr(telemetry, "_masked", counting)
    try:
        assert run_demo(PROMPT).status == ExecutionStatus.COMPLETED
        assert masked == []
        assert len(finished(exporter)) == len(masked) == 5
    finally:
        tracing.provider.shutdown()
