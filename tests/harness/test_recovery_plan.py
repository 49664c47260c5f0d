"""`prepare_tool_recovery` on histories (S43–S50, S62–S63, S76–S78; spec appendix outcomes)."""

from __future__ import annotations

import pytest
from pydantic_ai import DeferredToolResults as NativeResults
from pydantic_ai import (
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolApproved,
    ToolDenied,
    ToolFailed,
    ToolReturnPart,
)

from runs.harness import (
    INTERRUPTED_TOOL_RESULT,
    DeferredToolCall,
    DeferredToolResume,
    PendingDeferredCalls,
    RunError,
    prepare_tool_recovery,
)

# The recovery planner on its own, over hand-built histories: the outcome tables of the spec are checked case by
# case, which runs through the public surface reach only a few of.
from tests.support.tool_recovery import checkpoint_calls, checkpoint_history, is_unknown, unknown

MODES = ("declared", "never", "always")


def accepted(results: NativeResults, *, recovery: bool = True) -> DeferredToolResume:
    a_call, b_call = checkpoint_calls()
    requests = PendingDeferredCalls(
        calls=[DeferredToolCall(a_call, a_call, "tool/native/a")],
        approvals=[DeferredToolCall(b_call, b_call, "tool/native/b")],
    )
    return DeferredToolResume(requests, results, recovery=recovery)


def replay_ids(plan) -> list[str]:
    return [call.tool_call_id for call in plan.replay]


@pytest.mark.parametrize("mode", ["declared", "always"])
def test_unanswered_calls_stay_pending_with_replay_permission(mode):
    plan = prepare_tool_recovery(checkpoint_history(), mode)

    assert replay_ids(plan) == ["c1", "c2"]
    assert plan.deferred_tool_results.approvals == {"c1": ToolApproved(), "c2": ToolApproved()}
    assert plan.deferred_tool_results.calls == {}
    assert list(plan.history) == checkpoint_history()


def test_never_closes_the_history_directly():
    plan = prepare_tool_recovery(checkpoint_history(), "never")

    assert plan.deferred_tool_results is None and plan.replay == ()
    assert list(plan.history[:2]) == checkpoint_history()
    closing = plan.history[2]
    assert isinstance(closing, ModelRequest)
    assert [(p.tool_call_id, is_unknown(p)) for p in closing.parts] == [("c1", True), ("c2", True)]


@pytest.mark.filterwarnings("ignore:`RetryPromptPart` is deprecated")
@pytest.mark.parametrize("mode", MODES)
def test_recorded_results_and_retries_are_answers(mode):
    partial = checkpoint_history(ModelRequest(parts=[ToolReturnPart("a", "ok", tool_call_id="c1")]))
    retried = checkpoint_history(ModelRequest(parts=[RetryPromptPart("bad args", tool_name="a", tool_call_id="c1")]))
    retried_return = checkpoint_history(
        ModelRequest(parts=[ToolReturnPart("a", "bad args", tool_call_id="c1", outcome="retried")])
    )
    for history in (partial, retried, retried_return):
        plan = prepare_tool_recovery(history, mode)
        if mode == "never":
            # The completed partial request cannot be extended, so c2's unknown result is a native result.
            assert list(plan.history) == history and plan.replay == ()
            assert set(plan.deferred_tool_results.calls) == {"c2"} and not plan.deferred_tool_results.approvals
        else:
            assert replay_ids(plan) == ["c2"]
            assert set(plan.deferred_tool_results.approvals) == {"c2"}


def test_an_existing_unknown_result_is_never_reopened():
    history = checkpoint_history(ModelRequest(parts=[unknown("b", "c2")]))

    plan = prepare_tool_recovery(history, "always")

    assert replay_ids(plan) == ["c1"]
    assert set(plan.deferred_tool_results.approvals) == {"c1"}


@pytest.mark.parametrize("mode", MODES)
def test_provider_suspended_tail_is_left_to_the_native_path(mode):
    history = checkpoint_history()
    history[1] = ModelResponse(parts=history[1].parts, state="suspended")

    plan = prepare_tool_recovery(history, mode)

    assert plan.deferred_tool_results is None and plan.replay == ()
    assert list(plan.history) == history


def test_interrupted_response_tail():
    history = checkpoint_history()
    history[1] = ModelResponse(parts=history[1].parts, state="interrupted")

    never = prepare_tool_recovery(history, "never")
    declared = prepare_tool_recovery(history, "declared")

    assert isinstance(never.history[-1], ModelRequest)
    assert [is_unknown(p) for p in never.history[-1].parts] == [True, True]
    assert replay_ids(declared) == ["c1", "c2"]
    assert list(declared.history) == history


def test_interrupted_trailing_request_gets_the_unknown_result_appended():
    history = checkpoint_history(
        ModelRequest(parts=[ToolReturnPart("a", "ok", tool_call_id="c1")], state="interrupted")
    )

    never = prepare_tool_recovery(history, "never")
    declared = prepare_tool_recovery(history, "declared")

    assert len(never.history) == 3
    assert [p.tool_call_id for p in never.history[-1].parts] == ["c1", "c2"]
    assert is_unknown(never.history[-1].parts[1])
    assert replay_ids(declared) == ["c2"]


def test_never_with_a_completed_partial_request_answers_natively():
    history = checkpoint_history(ModelRequest(parts=[ToolReturnPart("a", "ok", tool_call_id="c1")]))

    plan = prepare_tool_recovery(history, "never")

    assert list(plan.history) == history
    assert plan.deferred_tool_results.approvals == {}
    failure = plan.deferred_tool_results.calls["c2"]
    assert isinstance(failure, ToolFailed) and failure.message == INTERRUPTED_TOOL_RESULT


@pytest.mark.parametrize("mode", MODES)
def test_accepted_facts_and_denials_count_under_every_mode(mode):
    """S44: retained external results and explicit denials stay authoritative, whatever the recovery mode."""
    batch = accepted(NativeResults(calls={"c1": "external"}, approvals={"c2": False}))

    plan = prepare_tool_recovery(checkpoint_history(), mode, batch)

    assert list(plan.history) == checkpoint_history()
    assert plan.deferred_tool_results.calls == {"c1": "external"}
    assert plan.deferred_tool_results.approvals == {"c2": ToolDenied()}
    assert plan.replay == ()


def test_positive_approval_is_not_replay_permission_of_its_own():
    batch = accepted(NativeResults(calls={"c1": "external"}, approvals={"c2": ToolApproved()}))

    never = prepare_tool_recovery(checkpoint_history(), "never", batch)
    declared = prepare_tool_recovery(checkpoint_history(), "declared", batch)

    assert never.deferred_tool_results.calls["c1"] == "external"
    assert isinstance(never.deferred_tool_results.calls["c2"], ToolFailed)
    assert never.replay == ()
    assert replay_ids(declared) == ["c2"]
    assert declared.deferred_tool_results.approvals == {"c2": ToolApproved()}


def test_explicit_denial_is_kept_with_its_message():
    batch = accepted(NativeResults(calls={"c1": 1}, approvals={"c2": ToolDenied("not today")}))

    plan = prepare_tool_recovery(checkpoint_history(), "declared", batch)

    assert plan.deferred_tool_results.approvals == {"c2": ToolDenied("not today")}
    assert plan.replay == ()


def test_accepted_fact_for_an_answered_call_is_rejected():
    history = checkpoint_history(ModelRequest(parts=[ToolReturnPart("a", "ok", tool_call_id="c1")]))
    batch = accepted(NativeResults(calls={"c1": "again"}, approvals={"c2": True}))

    with pytest.raises(RunError) as caught:
        prepare_tool_recovery(history, "declared", batch)

    assert caught.value.code == "deferred_state_invalid"


@pytest.mark.parametrize("mode", MODES)
def test_fresh_resume_is_applied_verbatim_whatever_the_mode(mode):
    batch = accepted(NativeResults(calls={"c1": 1}, approvals={"c2": ToolApproved()}), recovery=False)

    plan = prepare_tool_recovery(checkpoint_history(), mode, batch)

    assert plan.deferred_tool_results.approvals == {"c2": ToolApproved()}
    assert plan.deferred_tool_results.calls == {"c1": 1}
    assert plan.replay == () and plan.resume is batch


def test_nothing_to_recover():
    history = [*checkpoint_history(), ModelRequest(parts=[unknown("a", "c1"), unknown("b", "c2")])]
    history.append(ModelResponse(parts=[TextPart("all done")]))
    for mode in MODES:
        plan = prepare_tool_recovery(history, mode)
        assert plan.deferred_tool_results is None and list(plan.history) == history
    assert prepare_tool_recovery([], "declared").deferred_tool_results is None


def test_unknown_mode_is_rejected() -> None:
    with pytest.raises(ValueError):
        prepare_tool_recovery(checkpoint_history(), "sometimes")  # type: ignore[arg-type]  # an unknown mode on purpose


def test_empty_interrupted_request_of_a_cancelled_tool_step_is_dropped():
    history = checkpoint_history(ModelRequest(parts=[], state="interrupted"))

    declared = prepare_tool_recovery(history, "declared")
    never = prepare_tool_recovery(history, "never")

    assert list(declared.history) == checkpoint_history()
    assert replay_ids(declared) == ["c1", "c2"]
    assert [is_unknown(part) for part in never.history[-1].parts] == [True, True]
