"""OpenTelemetry end to end: a real RQ worker with `HARNESS_OTEL_ENABLED` runs the demo agent and sends its spans
over OTLP/HTTP to a collector stand-in this test starts (a real socket; the protobuf export decoded); and a
collector that is down or never answers leaves runs as they would be without it."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from harness_site.settings import channel_layer_config
from runs.models import Execution, ExecutionStatus
from runs.services.lifecycle import executions
from runs.services.timeline import REDACTED
from tests.support import factories
from tests.support.demo_scenes import approve_all
from tests.support.host_runs import DEMO_TOOLS
from tests.support.otlp_collector import OtlpCollector
from tests.support.services import RedisServer, RQWorker, free_port, running, service_env, wait_until

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "hunter2-in-the-prompt"
# The demo searches the records for the prompt itself, so the secret is in a tool argument and result too.
PROMPT = f"look up REC-7 for password={SECRET}"


@pytest.fixture
def traced_queue(settings) -> Iterator[RedisServer]:
    """A redis-server of its own, so only this test's traced worker takes its jobs."""
    server = RedisServer().start()
    settings.REDIS_URL = server.url
    settings.CHANNEL_LAYERS = {"default": channel_layer_config(server.url)}
    settings.RQ_QUEUES = {"default": {"URL": server.url, "DEFAULT_TIMEOUT": 600}}
    try:
        yield server
    finally:
        server.stop()


def traced_worker(settings, queue: RedisServer, endpoint: str) -> RQWorker:
    env = service_env(redis_url=queue.url, database_name=settings.DATABASES["default"]["NAME"])
    # Only what the test says: no OTEL_* variable of the machine running the tests points the spans elsewhere.
    env = {name: value for name, value in env.items() if not name.startswith("OTEL_")}
    return RQWorker(
        env
        | {
            "HARNESS_OTEL_ENABLED": "1",
            "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
            # Batches go every 100 ms instead of every 5 s, so spans arrive while the run is still going.
            "OTEL_BSP_SCHEDULE_DELAY": "100",
        }
    )


def wait_for_status(execution: Execution, status: str) -> None:
    def reached() -> bool:
        execution.refresh_from_db()
        return execution.status in (status, ExecutionStatus.FAILED)

    wait_until(reached, timeout=90, what=f"execution {execution.pk} to become {status}")
    assert execution.status == status, execution.failure_message


def test_the_worker_sends_a_run_s_model_request_and_tool_call_spans_with_its_ids_and_masked(settings, traced_queue):
    factories.configure_policy(redact_patterns=["password"])
    names = ("chat demo-scripted", "execute_tool lookup_record", "execute_tool search_records")
    with OtlpCollector() as collector, running(traced_worker(settings, traced_queue, collector.url)):
        execution = executions.start_execution(factories.thread(model="demo", tools=DEMO_TOOLS), PROMPT)
        wait_for_status(execution, ExecutionStatus.COMPLETED)
        agent_run = f"invoke_agent {execution.thread.profile.name}"
        wait_until(
            lambda: all(collector.named(name) for name in (*names, agent_run)),
            timeout=60,
            what="the run's spans at the collector",
        )

    run = execution.runs.get()
    spans = collector.spans
    assert {span.name for span in spans} == {*names, agent_run}
    for span in spans:
        assert span.service == "harness-host"
        assert span.attributes["harness.execution_id"] == execution.pk
        assert span.attributes["harness.run_id"] == run.run_id
        assert span.attributes["harness.thread_id"] == execution.thread.thread_id

    assert not [span.name for span in spans if SECRET in span.text()]
    [search] = collector.named("execute_tool search_records")
    assert json.loads(search.attributes["gen_ai.tool.call.arguments"]) == {
        "query": f"look up REC-7 for password={REDACTED}"
    }
    assert f"password={REDACTED}" in search.attributes["gen_ai.tool.call.result"]
    assert any(f"password={REDACTED}" in span.attributes["gen_ai.input.messages"] for span in collector.named(names[0]))


@pytest.mark.parametrize("collector_state", ["down", "never answering"])
def test_a_collector_that_is_down_or_never_answers_leaves_runs_unaffected(
    settings, traced_queue, operator_user, collector_state
):
    holding = OtlpCollector(holding=True)
    endpoint = holding.url if collector_state == "never answering" else f"http://127.0.0.1:{free_port()}"
    with holding, running(traced_worker(settings, traced_queue, endpoint)):
        execution = executions.start_execution(factories.thread(model="demo", tools=DEMO_TOOLS), "deploy release 2.0")
        wait_for_status(execution, ExecutionStatus.WAITING)
        if collector_state == "never answering":
            # The suspended run's spans are out, and their export hangs on the collector from now on.
            wait_until(lambda: holding.exports, timeout=60, what="an export held by the collector")

        approve_all(execution, operator_user)
        wait_for_status(execution, ExecutionStatus.COMPLETED)
        # Completed while every export it was sent still waits for an answer.
        assert holding.answered == 0
        # Let the worker's last flush go before it is stopped.
        holding.released.set()

    assert [run.status for run in execution.runs.order_by("pk")] == ["suspended", "completed"]
