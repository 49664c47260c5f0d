"""Result field rules, safe failures and stream item values (spec 3.3, 3.6, 5.1)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import ValidationError
from pydantic_ai.usage import RunUsage

from runs.harness import (
    HarnessEvent,
    HarnessExtensionEvent,
    HarnessRunResult,
    HarnessRunResultEvent,
    HarnessState,
    InlineDelegationPayload,
    RunCleanupError,
    RunError,
    RunUsageSummary,
    SafeFailure,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)
STATE = HarnessState.new(thread_id="thr_a1")


def result(**fields):
    return HarnessRunResult(thread_id="thr_a1", run_id="run-1", **fields)


def test_completed_result_needs_a_state_of_the_same_thread():
    """T10."""
    with pytest.raises(ValueError, match="different thread"):
        result(status="completed", state=HarnessState.new(thread_id="thr_b1"))
    with pytest.raises(ValueError, match="needs a state"):
        result(status="completed")


def test_suspended_result_needs_deferred_requests_and_no_output():
    """T10."""
    with pytest.raises(ValueError):
        result(status="suspended", state=STATE, suspend_reason="deferred")
    with pytest.raises(ValueError):
        result(status="suspended", state=STATE, suspend_reason="deferred", deferred=object(), output="x")


def test_failed_result_needs_a_failure_and_cancelled_carries_nothing():
    """T10."""
    with pytest.raises(ValueError):
        result(status="failed", state=STATE)
    with pytest.raises(ValueError):
        result(status="cancelled", output="partial")
    failed = result(status="failed", failure=SafeFailure(code="agent_run_failed", message="boom"))
    assert failed.state is None
    assert result(status="cancelled").state is None


def test_result_getters_return_copies():
    """T11: mutating returned output or deferred data leaves the result unchanged."""
    deferred = {"calls": ["c1"]}
    suspended = result(status="suspended", state=STATE, suspend_reason="deferred", deferred=deferred)
    suspended.deferred["calls"].append("c2")
    deferred["calls"].append("c3")
    assert suspended.deferred == {"calls": ["c1"]}

    completed = result(status="completed", state=STATE, output={"items": [1]})
    completed.output["items"].append(2)
    assert completed.output == {"items": [1]}


def test_results_are_immutable() -> None:
    completed = result(status="completed", state=STATE, output="ok")
    with pytest.raises(AttributeError):
        completed.status = "failed"
    with pytest.raises(AttributeError):
        completed._output = "changed"


def test_raise_for_status_maps_each_status():
    failure = SafeFailure(
        code="usage_limit_exceeded", message="limit", retry_hint="dependency_change", details={"a": 1}
    )
    with pytest.raises(RunError) as failed:
        result(status="failed", failure=failure).raise_for_status()
    assert (failed.value.code, failed.value.retry_hint, failed.value.details) == (
        "usage_limit_exceeded",
        "dependency_change",
        {"a": 1},
    )
    with pytest.raises(RunError) as suspended:
        result(status="suspended", state=STATE, suspend_reason="deferred", deferred={}).output_or_raise()
    assert (suspended.value.code, suspended.value.retry_hint) == ("run_suspended", "new_run")
    with pytest.raises(RunError, match="cancelled"):
        result(status="cancelled").raise_for_status()
    assert result(status="completed", state=STATE, output="ok").output_or_raise() == "ok"


def test_replace_rechecks_the_rules():
    completed = result(status="completed", state=STATE, output="ok")
    assert completed.replace(output="changed").output == "changed"
    with pytest.raises(ValueError):
        completed.replace(status="failed")


def test_cleanup_error_carries_the_uncertain_outcome():
    """S82: code, retry hint, outcome and causes (type names only as notes)."""
    outcome = result(status="completed", state=STATE, output="ok")
    cause = RuntimeError("secret token abc")
    error = RunCleanupError("teardown failed", outcome=outcome, causes=[cause])
    assert error.code == "run_cleanup_failed"
    assert error.retry_hint == "new_run"
    assert error.details == {"cause_count": 1}
    assert error.outcome is outcome
    assert error.causes == (cause,)
    assert error.__notes__ == ["cause: RuntimeError"]


def test_usage_summary_keeps_the_token_breakdown():
    usage = RunUsage(
        requests=2,
        tool_calls=1,
        input_tokens=10,
        output_tokens=4,
        cache_read_tokens=6,
        cache_write_tokens=3,
        output_reasoning_tokens=2,
    )
    summary = RunUsageSummary.from_usage(usage)
    assert summary.model_dump() == {
        "requests": 2,
        "tool_calls": 1,
        "input_tokens": 10,
        "output_tokens": 4,
        "cache_read_tokens": 6,
        "cache_write_tokens": 3,
        "reasoning_tokens": 2,
    }
    assert summary.total_tokens == 14


def test_harness_event_validates_identity():
    event = HarnessExtensionEvent(kind="lifecycle", payload={"type": "run_started"})
    assert HarnessEvent("thr_a1", "run-1", 0, NOW, event).sequence == 0
    for bad in (("", "run-1", 0), ("thr_a1", " ", 0), ("thr_a1", "run-1", -1), ("thr_a1", "run-1", True)):
        with pytest.raises(ValueError):
            HarnessEvent(*bad, NOW, event)


def test_result_event_must_match_its_result():
    completed = result(status="completed", state=STATE, output="ok")
    assert HarnessRunResultEvent("thr_a1", "run-1", 3, NOW, completed).result is completed
    with pytest.raises(ValueError):
        HarnessRunResultEvent("thr_a1", "run-2", 3, NOW, completed)
    with pytest.raises(TypeError):
        HarnessRunResultEvent("thr_a1", "run-1", 3, NOW, "not a result")


def test_extension_payload_is_redacted_and_bounded() -> None:
    event = HarnessExtensionEvent(
        kind="tool",
        payload={
            "api_key": "sk-1",
            "nested": [{"password": "p"}],
            "header": "Bearer abc.def",
            "input_tokens": 3,
        },
    )
    assert event.payload == {
        "api_key": "[REDACTED]",
        "nested": [{"password": "[REDACTED]"}],
        "header": "Bearer [REDACTED]",
        "input_tokens": 3,
    }
    with pytest.raises(ValidationError):
        HarnessExtensionEvent(kind="tool", payload="x" * (65 * 1024))
    with pytest.raises(ValidationError):
        HarnessExtensionEvent(kind="unknown", payload={})


def test_inline_delegation_started_needs_child_run_id():
    fields = dict(
        invocation_id="delegation-" + "0" * 32,
        child_instance_id="researcher",
        subagent="researcher",
        status="running",
        parent_run_id="run-1",
        parent_agent_instance_id="root",
    )
    with pytest.raises(ValidationError):
        InlineDelegationPayload(action="started", **fields)
    failed = InlineDelegationPayload(action="failed", **fields).to_event()
    assert failed.kind == "delegation"
    assert failed.payload["action"] == "failed"
    assert "child_run_id" not in failed.payload


def test_results_copy_and_pickle_through_the_constructor():
    import copy
    import pickle

    completed = result(status="completed", state=STATE, output={"items": [1]})
    for clone in (copy.copy(completed), copy.deepcopy(completed), pickle.loads(pickle.dumps(completed))):
        assert clone == completed
        assert clone is not completed
