"""An agent profile on a real provider client: pydantic-ai's OpenAI chat model and the `openai` SDK, run by the
RQ worker against a local OpenAI-compatible server (no FunctionModel anywhere on this path)."""

from __future__ import annotations

import pytest

from harness_site.settings import channel_layer_config
from runs.models import (
    AgentProfile,
    DeferredRequest,
    Execution,
    ExecutionStatus,
    Thread,
    TimelineEvent,
    ToolDispatch,
    Verdict,
)
from runs.services.lifecycle import Answer, executions, submit_decisions
from runs.services.store.providers import NO_KEY
from tests import factories
from tests.providers.openai_compatible import ANSWER_CHUNKS, USAGE, OpenAICompatibleServer, ProviderScript
from tests.services import RedisServer, RQWorker, free_port, running, service_env, wait_until

ENV_KEY = "sk-the-worker-s-own-openai-key"
PROFILE_KEY = "sk-the-local-llm-profile-key"


def provider_thread(base_url: str, model: str = "openai-chat:tiny-llm", name: str = "local-llm") -> Thread:
    profile = AgentProfile.objects.create(name=name, model=model, base_url=base_url, enabled_tools=["lookup_record"])
    return executions.create_thread(profile, title="On a real provider client")


def wait_for_status(execution: Execution, *statuses: str, timeout: float = 60) -> None:
    def reached() -> bool:
        execution.refresh_from_db()
        return execution.status in statuses

    wait_until(reached, timeout=timeout, what=f"execution {execution.pk} to become {' or '.join(statuses)}")


def events_of(execution: Execution, event_type: str) -> list[dict]:
    return list(
        TimelineEvent.objects.filter(execution=execution, event_type=event_type)
        .order_by("position")
        .values_list("event", flat=True)
    )


def test_a_gated_tool_call_from_a_streaming_provider_waits_for_approval_then_the_answer_streams(
    live_stack, operator_user
):
    factories.configure_policy(approval_rules=[{"tool": "lookup_record", "reason": "Records are private."}])
    with OpenAICompatibleServer() as server:
        execution = executions.start_execution(provider_thread(server.base_url), "look up REC-42")
        wait_for_status(execution, ExecutionStatus.WAITING, ExecutionStatus.FAILED)
        assert execution.status == ExecutionStatus.WAITING, execution.failure_message

        request = DeferredRequest.objects.get(execution=execution)
        assert (request.tool_name, request.args) == ("lookup_record", {"record_id": "REC-42"})
        assert not ToolDispatch.objects.exists(), "the gated tool must not run before it is approved"
        submit_decisions(
            execution,
            checkpoint_id=request.checkpoint_id,
            key="provider-1",
            answers=[Answer(request.tool_call_id, Verdict.APPROVED)],
            user=operator_user,
        )
        wait_for_status(execution, ExecutionStatus.COMPLETED, ExecutionStatus.FAILED)
        assert execution.status == ExecutionStatus.COMPLETED, execution.failure_message

    # The provider was called twice: for the tool call, and (after the approval) with the tool's result.
    first, second = server.script.requests
    assert first["stream"] is True and first["model"] == "tiny-llm"
    assert any(tool["function"]["name"] == "lookup_record" for tool in first["tools"])
    tool_messages = [message for message in second["messages"] if message["role"] == "tool"]
    assert len(tool_messages) == 1 and "REC-42" in tool_messages[0]["content"]

    [started] = events_of(execution, "TOOL_CALL_START")
    assert started["toolCallName"] == "lookup_record"
    args = "".join(event["delta"] for event in events_of(execution, "TOOL_CALL_ARGS"))
    assert args.replace(" ", "") == '{"record_id":"REC-42"}'
    [result] = events_of(execution, "TOOL_CALL_RESULT")
    assert "REC-42" in result["content"]
    # The answer arrived as the provider streamed it, one delta per chunk.
    assert [event["delta"] for event in events_of(execution, "TEXT_MESSAGE_CONTENT")] == list(ANSWER_CHUNKS)
    # Token usage reported by the provider reaches the run's finish event.
    finished = events_of(execution, "RUN_FINISHED")[-1]
    assert finished["usage"][0]["inputTokens"] == USAGE["prompt_tokens"]
    assert finished["usage"][0]["outputTokens"] == USAGE["completion_tokens"]
    resumed = execution.runs.order_by("number").last()
    assert resumed.reason == "resume" and resumed.status == "completed"


@pytest.mark.parametrize(
    ("status", "code", "said", "attempts"),
    # A wrong key is never retried; a rate limit is retried as often as the policy allows.
    [
        (401, "model_auth_failed", "HTTP 401, provider code invalid_api_key", 1),
        (429, "model_rate_limited", "HTTP 429, provider code rate_limit_exceeded", 2),
    ],
)
def test_a_provider_that_refuses_fails_the_run_saying_why(live_stack, status, code, said, attempts):
    factories.configure_policy(model_max_retries=1)
    with OpenAICompatibleServer(ProviderScript(refuse_with=status)) as server:
        execution = executions.start_execution(provider_thread(server.base_url), "look up REC-42")
        wait_for_status(execution, ExecutionStatus.FAILED, ExecutionStatus.COMPLETED)
    assert execution.failure_code == code
    assert said in execution.failure_message
    # The provider's error body is not repeated: bodies can echo the request.
    assert "Refused by the test server" not in execution.failure_message
    # The policy allows one retry of a failed request, and not one more (the SDK's own default is two).
    assert len(server.script.requests) == attempts
    [error] = events_of(execution, "RUN_ERROR")
    assert error["code"] == code


def test_an_unreachable_server_fails_the_run_saying_so(live_stack):
    factories.configure_policy(model_max_retries=0)
    execution = executions.start_execution(provider_thread(f"http://127.0.0.1:{free_port()}/v1"), "look up REC-42")
    wait_for_status(execution, ExecutionStatus.FAILED, ExecutionStatus.COMPLETED)
    assert execution.failure_code == "model_unreachable"
    assert "could not be reached" in execution.failure_message


def test_a_provider_without_its_key_fails_before_any_request(live_stack):
    # The worker's environment (tests/services.py) carries no OPENAI_API_KEY.
    thread = provider_thread("", model="openai:gpt-4o")
    execution = executions.start_execution(thread, "look up REC-42")
    wait_for_status(execution, ExecutionStatus.FAILED, ExecutionStatus.COMPLETED)
    assert execution.failure_code == "model_provider_not_ready"
    assert "OPENAI_API_KEY" in execution.failure_message


@pytest.fixture
def worker_with_keys(settings, transactional_db):
    """A worker whose environment holds the provider's key and one profile's key, on a Redis of its own so that
    only it takes this test's jobs."""
    server = RedisServer().start()
    settings.REDIS_URL = server.url
    settings.CHANNEL_LAYERS = {"default": channel_layer_config(server.url)}
    settings.RQ_QUEUES = {"default": {"URL": server.url, "DEFAULT_TIMEOUT": 600}}
    env = service_env(redis_url=server.url, database_name=settings.DATABASES["default"]["NAME"])
    env |= {"OPENAI_API_KEY": ENV_KEY, "HARNESS_PROFILE_LOCAL_LLM_API_KEY": PROFILE_KEY}
    try:
        with running(RQWorker(env)):
            yield
    finally:
        server.stop()


def test_a_profile_s_base_url_gets_the_profile_s_key_or_none_never_the_provider_s(worker_with_keys):
    with OpenAICompatibleServer() as server:
        keyed = executions.start_execution(provider_thread(server.base_url), "look up REC-42")
        wait_for_status(keyed, ExecutionStatus.COMPLETED, ExecutionStatus.FAILED)
        keyless = executions.start_execution(provider_thread(server.base_url, name="other-llm"), "look up REC-42")
        wait_for_status(keyless, ExecutionStatus.COMPLETED, ExecutionStatus.FAILED)
    assert (keyed.status, keyless.status) == (ExecutionStatus.COMPLETED, ExecutionStatus.COMPLETED)
    # Two requests per run (the tool call, then the answer): the first run's with its profile's key, the
    # second's with none of the worker's keys.
    assert server.script.authorizations == [f"Bearer {PROFILE_KEY}"] * 2 + [f"Bearer {NO_KEY}"] * 2
