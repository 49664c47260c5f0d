"""The engine side of Host-managed children (S72): a child tool defers its call, the suspended result names it a
child, and the parent resumes with the child's outcome like any external call's."""

from __future__ import annotations

import pytest
from pydantic_ai import DeferredToolRequests as NativeRequests
from pydantic_ai import DeferredToolResults as NativeResults
from pydantic_ai import ModelRequest, ModelResponse, ModelRetry, ToolCallPart, ToolFailed, UserPromptPart

from observers.agui import HarnessAguiObserver
from runs.harness import (
    CHILD_METADATA_KEY,
    ChildRequest,
    DeferredToolCall,
    DeferredToolResume,
    HarnessState,
    PendingDeferredCalls,
    RunError,
    child_request_of,
    decode_resume,
    encode_resume,
    host_child_tool,
    preflight_deferred_resume,
)
from runs.harness.demo import build_demo_agent
from tests.support.factories import SourceRun

PROMPT = "deploy release 3.0 and a child: look up REC-7"


async def test_a_child_call_suspends_the_run_as_a_child_request_beside_an_approval():
    result = await build_demo_agent().run(PROMPT)

    assert result.status == "suspended" and result.deferred is not None
    deferred = result.deferred
    (child,) = deferred.calls
    (approval,) = deferred.approvals
    child_id = child.target_call.tool_call_id
    assert deferred.children == [child_id]
    assert (deferred.kind(child_id), deferred.kind(approval.target_call.tool_call_id)) == ("child", "approval")
    assert child_request_of(deferred.metadata[child_id]) == ChildRequest(prompt="look up REC-7")
    # Stored and read back (a run's journal, a checkpoint's pending input), the child stays a child.
    results = deferred.build_results(approvals={approval.target_call.tool_call_id: True}, calls={child_id: "x"})
    assert decode_resume(encode_resume(DeferredToolResume(deferred, results))).requests.children == [child_id]


async def test_the_parent_resumes_with_the_childs_output_or_its_failure():
    agent = build_demo_agent()
    suspended = await agent.run(PROMPT)
    deferred = suspended.deferred
    child_id = deferred.children[0]
    approval_id = deferred.approvals[0].target_call.tool_call_id

    async def resumed(child_answer: object) -> str:
        results = deferred.build_results(approvals={approval_id: True}, calls={child_id: child_answer})
        result = await agent.run(
            None, previous_state=suspended.state, deferred_resume=DeferredToolResume(deferred, results)
        )
        assert result.status == "completed"
        return result.output

    assert "delegate_to_child (success): REC-7: status=active" in await resumed("REC-7: status=active")
    assert "delegate_to_child (failed)" in await resumed(ToolFailed("The child execution failed."))


def test_a_child_must_be_an_external_call_and_not_a_question():
    """The resume check refuses such request sets (a run cannot be made to suspend with them)."""
    call = ToolCallPart("delegate_to_child", {"task": "x"}, tool_call_id="c1")
    entry = DeferredToolCall(call, call)
    suspended = HarnessState.new(
        thread_id="thr_children1",
        message_history=[ModelRequest(parts=[UserPromptPart("go")]), ModelResponse(parts=[call])],
    )
    for requests, results in (
        (PendingDeferredCalls(approvals=[entry], children=["c1"]), NativeResults(approvals={"c1": True})),
        (PendingDeferredCalls(calls=[entry], questions=["c1"], children=["c1"]), NativeResults(calls={"c1": "x"})),
        (PendingDeferredCalls(calls=[entry], children=["other"]), NativeResults(calls={"c1": "x"})),
    ):
        with pytest.raises(RunError) as caught:
            preflight_deferred_resume(DeferredToolResume(requests, results), suspended)
        assert caught.value.code == "deferred_request_invalid"
    valid = DeferredToolResume(PendingDeferredCalls(calls=[entry], children=["c1"]), NativeResults(calls={"c1": "x"}))
    assert preflight_deferred_resume(valid, suspended) is valid


def test_remaining_keeps_only_open_children():
    call = ToolCallPart("delegate_to_child", {"task": "x"}, tool_call_id="c1")
    native = NativeRequests(calls=[call], metadata={"c1": {CHILD_METADATA_KEY: {"prompt": "x"}}})
    requests = PendingDeferredCalls.export(native)
    assert requests.children == ["c1"]
    other = PendingDeferredCalls.export(NativeRequests(calls=[call]))
    assert (other.children, other.kind("c1")) == ([], "external")


def test_the_child_tool_defers_with_its_request_and_refuses_an_empty_task():
    tool = host_child_tool("hand_off", description="Hand off.", profile="researcher")
    with pytest.raises(ModelRetry):
        tool.function("  ")
    with pytest.raises(Exception) as deferred:
        tool.function("find REC-7")
    assert type(deferred.value).__name__ == "CallDeferred"
    assert deferred.value.metadata == {CHILD_METADATA_KEY: {"prompt": "find REC-7", "profile": "researcher"}}


def test_the_projection_marks_a_childs_interrupt_for_the_host():
    run = SourceRun(run_id="run-1")
    call = ToolCallPart("delegate_to_child", {"task": "x"}, tool_call_id="c1")
    observer = HarnessAguiObserver()
    observer.observe(run.started())
    entry = DeferredToolCall(call, call)
    deferred = PendingDeferredCalls(
        calls=[entry], metadata={"c1": {CHILD_METADATA_KEY: {"prompt": "x"}}}, children=["c1"]
    )
    item = run.result("suspended", suspend_reason="deferred", deferred=deferred)
    (finished,) = observer.observe(item)
    assert [interrupt.reason for interrupt in finished.outcome.interrupts] == ["child"]
