"""Tool recovery and interrupted deferred continuation through `executable.run` / `stream` (S43–S65, S73–S79).

Covers the full matrix never/declared/always × retryable/unmarked/unavailable/already-answered/unknown-result,
the T36–T55 scenarios that need a whole Harness run, and T71–T78.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic_ai import DeferredToolResults as NativeResults
from pydantic_ai import (
    ModelRequest,
    ModelResponse,
    TextPart,
    Tool,
    ToolApproved,
    ToolCallPart,
    ToolDenied,
    ToolReturnPart,
    UserPromptPart,
)

from runs.harness import (
    AgentDefinition,
    DeferredToolCall,
    DeferredToolResume,
    ExecutableAgent,
    HarnessState,
    PendingDeferredCalls,
    RunBindings,
    recovery_retryable,
)
from tests.support.tool_recovery import (
    FIXED_TIME,
    Recorder,
    Spy,
    checkpoint_calls,
    checkpoint_history,
    is_unknown,
    returns_by_id,
    unknown,
)

MODES = ("never", "declared", "always")


def build(recorder: Recorder, tools: list[Any], **settings: Any) -> ExecutableAgent[str]:
    return AgentDefinition(model=recorder.model(), tools=tools, **settings).build()


def checkpoint(*tail: Any, thread_id: str = "thr_recovery1") -> HarnessState:
    return HarnessState.new(thread_id=thread_id, message_history=checkpoint_history(*tail))


def single_call_state(case: str) -> HarnessState:
    """A checkpoint whose last response called `t` as c1 (and `other` as c0, already answered)."""
    history: list[Any] = [
        ModelRequest(parts=[UserPromptPart("work", timestamp=FIXED_TIME)]),
        ModelResponse(
            parts=[
                ToolCallPart("other", {"x": 0}, tool_call_id="c0"),
                ToolCallPart("t", {"x": 7}, tool_call_id="c1"),
            ]
        ),
    ]
    answers = [ToolReturnPart("other", "earlier", tool_call_id="c0")]
    if case == "already-answered":
        answers.append(ToolReturnPart("t", "recorded", tool_call_id="c1"))
    elif case == "unknown-result":
        answers.append(unknown("t", "c1"))
    history.append(ModelRequest(parts=answers))
    return HarnessState.new(thread_id="thr_matrix1", message_history=history)


MATRIX = {
    # case: (tool surface, {mode: executed?})
    "retryable": ("declared", {"never": False, "declared": True, "always": True}),
    "unmarked": ("unmarked", {"never": False, "declared": False, "always": True}),
    "unavailable": (None, {"never": False, "declared": False, "always": False}),
    "already-answered": ("declared", {"never": False, "declared": False, "always": False}),
    "unknown-result": ("declared", {"never": False, "declared": False, "always": False}),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", list(MATRIX))
async def test_recovery_matrix(mode, case):
    surface, executed_by_mode = MATRIX[case]
    spy = Spy()
    tools: list[Any] = [Tool(spy.tool("other"))]
    if surface == "declared":
        tools.append(recovery_retryable(spy.tool("t")))
    elif surface == "unmarked":
        tools.append(Tool(spy.tool("t")))
    previous = single_call_state(case)
    before = previous.model_dump_json()

    result = await build(Recorder(), tools).run(previous_state=previous, tool_recovery=mode)

    assert result.status == "completed"
    executed = executed_by_mode[mode]
    assert spy.runs == ([("t", {"x": 7})] if executed else [])
    c1_results = returns_by_id(result.state.message_history)["c1"]
    assert len(c1_results) == 1, "exactly one result per call, never a second one"
    if case == "already-answered":
        assert c1_results[0].content == "recorded"
    elif executed:
        assert (c1_results[0].outcome, c1_results[0].content) == ("success", "t ran with 7")
    else:
        assert is_unknown(c1_results[0])
    assert [p.content for p in returns_by_id(result.state.message_history)["c0"]] == ["earlier"]
    assert previous.model_dump_json() == before


async def test_seed_sample_policy_recovery_declared_by_default():
    spy = Spy()
    recorder = Recorder()
    executable = build(recorder, [recovery_retryable(spy.tool("a")), Tool(spy.tool("b"))])
    checkpoint_state = checkpoint()

    result = await executable.run(
        bindings=RunBindings.embedded(),
        previous_state=checkpoint_state,
        tool_recovery="declared",  # The default; use "never" to disable all replay.
    )

    assert result.status == "completed" and spy.runs == [("a", {"x": 1})]
    sent = recorder.first_request_results()
    assert sent["c1"].content == "a ran with 1" and is_unknown(sent["c2"])
    assert result.thread_id == checkpoint_state.thread_id


async def test_never_mode_closes_every_unanswered_call():
    spy = Spy()
    recorder = Recorder()
    executable = build(recorder, [recovery_retryable(spy.tool("a")), Tool(spy.tool("b"))])

    result = await executable.run(previous_state=checkpoint(), tool_recovery="never")

    assert spy.runs == []
    assert set(recorder.first_request_results()) == {"c1", "c2"}
    assert all(is_unknown(part) for part in recorder.first_request_results().values())
    assert result.status == "completed"


async def test_new_input_is_sent_after_the_recovered_results():
    spy = Spy()
    recorder = Recorder()
    executable = build(recorder, [recovery_retryable(spy.tool("a")), Tool(spy.tool("b"))])

    await executable.run("continue", previous_state=checkpoint())

    last = recorder.requests[0][-1]
    kinds = [type(part).__name__ for part in last.parts]
    assert kinds[-1] == "UserPromptPart" and kinds.count("ToolReturnPart") == 2


@pytest.mark.parametrize("mode", MODES)
async def test_new_calls_after_recovery_execute_normally(mode):
    spy = Spy()
    recorder = Recorder(calls_after_results=[ToolCallPart("b", {"x": 3}, tool_call_id="c3")])

    await build(recorder, [recovery_retryable(spy.tool("a")), Tool(spy.tool("b"))]).run(
        previous_state=checkpoint(), tool_recovery=mode
    )

    assert ("b", {"x": 3}) in spy.runs


async def test_replayed_tool_needing_approval_suspends_in_a_whole_run():
    spy = Spy()
    tools = [recovery_retryable(Tool(spy.tool("a"), requires_approval=True)), Tool(spy.tool("b"))]

    result = await build(Recorder(), tools).run(previous_state=checkpoint())

    assert result.status == "suspended" and spy.runs == []
    assert [item.model_call.tool_call_id for item in result.deferred.approvals] == ["c1"]


async def test_recovery_mode_is_not_part_of_the_state_and_must_be_known() -> None:
    spy = Spy()
    executable = build(Recorder(), [recovery_retryable(spy.tool("a")), Tool(spy.tool("b"))])

    result = await executable.run(previous_state=checkpoint(), tool_recovery="always")

    assert result.state is not None
    assert "tool_recovery" not in result.state.model_dump_json()
    with pytest.raises(ValueError):
        executable.stream(previous_state=checkpoint(), tool_recovery="sometimes")  # type: ignore[arg-type]  # an unknown mode on purpose
    with pytest.raises(ValueError):
        await executable.run(previous_state=checkpoint(), tool_recovery="sometimes")  # type: ignore[arg-type]  # as above


async def test_interrupted_response_tail_keeps_the_original_call_id():
    history = checkpoint_history()
    history[1] = ModelResponse(parts=history[1].parts, state="interrupted")
    previous = HarnessState.new(thread_id="thr_recovery1", message_history=history)
    spy = Spy()

    result = await build(Recorder(), [recovery_retryable(spy.tool("a")), Tool(spy.tool("b"))]).run(
        previous_state=previous
    )

    assert spy.runs == [("a", {"x": 1})]
    found = returns_by_id(result.state.message_history)
    assert found["c1"][0].content == "a ran with 1" and is_unknown(found["c2"][0])


# --- accepted deferred input and recovery=True (S73–S79) --------------------------------------------------


def accepted_batch(results: NativeResults) -> DeferredToolResume:
    a_call, b_call = checkpoint_calls()
    requests = PendingDeferredCalls(
        calls=[DeferredToolCall(a_call, a_call, "tool/%3Cagent%3E/a")],
        approvals=[DeferredToolCall(b_call, b_call, "tool/%3Cagent%3E/b")],
    )
    return DeferredToolResume(requests, results, recovery=True)


def approval_tools(spy: Spy, *, b: str) -> list[Tool]:
    """`a` is the external-call target (answered by the Host); `b` the locally approved action."""
    b_tool = Tool(spy.tool("b"), requires_approval=b.endswith("approval"))
    return [Tool(spy.tool("a")), recovery_retryable(b_tool) if b.startswith("declared") else b_tool]


async def test_retained_fact_is_consumed_and_local_work_follows_never():
    spy = Spy()
    recorder = Recorder()
    batch = accepted_batch(NativeResults(calls={"c1": "external value"}, approvals={"c2": ToolApproved()}))

    result = await build(recorder, approval_tools(spy, b="declared")).run(
        previous_state=checkpoint(), deferred_resume=batch, tool_recovery="never"
    )

    assert spy.runs == []
    sent = recorder.first_request_results()
    assert (sent["c1"].outcome, sent["c1"].content) == ("success", "external value")
    assert is_unknown(sent["c2"])
    assert result.status == "completed"


async def test_old_approval_is_not_reused_when_approval_is_still_required():
    spy = Spy()
    batch = accepted_batch(NativeResults(calls={"c1": "external value"}, approvals={"c2": ToolApproved()}))

    result = await build(Recorder(), approval_tools(spy, b="declared-approval")).run(
        previous_state=checkpoint(), deferred_resume=batch, tool_recovery="declared"
    )

    assert result.status == "suspended" and spy.runs == []
    assert [item.model_call.tool_call_id for item in result.deferred.approvals] == ["c2"]
    assert returns_by_id(result.state.message_history)["c1"][0].content == "external value"


@pytest.mark.parametrize(("b", "runs"), [("declared", True), ("unmarked", False)])
async def test_local_work_without_approval_follows_the_declaration(b, runs):
    spy = Spy()
    recorder = Recorder()
    batch = accepted_batch(NativeResults(calls={"c1": "external value"}, approvals={"c2": ToolApproved()}))

    await build(recorder, approval_tools(spy, b=b)).run(
        previous_state=checkpoint(), deferred_resume=batch, tool_recovery="declared"
    )

    assert spy.runs == ([("b", {"x": 2})] if runs else [])
    assert is_unknown(recorder.first_request_results()["c2"]) is not runs


async def test_retained_denial_wins_under_never():
    spy = Spy()
    recorder = Recorder()
    batch = accepted_batch(
        NativeResults(calls={"c1": "external value"}, approvals={"c2": ToolDenied("operator said no")})
    )

    await build(recorder, approval_tools(spy, b="declared")).run(
        previous_state=checkpoint(), deferred_resume=batch, tool_recovery="never"
    )

    sent = recorder.first_request_results()
    assert (sent["c2"].outcome, sent["c2"].content) == ("denied", "operator said no")
    assert spy.runs == []


async def test_incorporated_input_is_filtered_out():
    spy = Spy()
    batch = accepted_batch(NativeResults(calls={"c1": "external value"}, approvals={"c2": ToolDenied("no")}))
    partly = checkpoint(ModelRequest(parts=[ToolReturnPart("a", "external value", tool_call_id="c1")]))
    fully = checkpoint(
        ModelRequest(
            parts=[
                ToolReturnPart("a", "external value", tool_call_id="c1"),
                ToolReturnPart("b", "no", tool_call_id="c2", outcome="denied"),
            ]
        )
    )
    executable = build(Recorder(), approval_tools(spy, b="declared"))

    partial_result = await executable.run(previous_state=partly, deferred_resume=batch, tool_recovery="never")
    full_result = await executable.run(previous_state=fully, deferred_resume=batch, tool_recovery="never")

    found = returns_by_id(partial_result.state.message_history)
    assert len(found["c1"]) == 1 and found["c2"][0].outcome == "denied"
    assert full_result.status == "completed"
    assert spy.runs == []


async def test_cancelled_recovery_run_keeps_the_accepted_calls_open():
    spy = Spy()
    batch = accepted_batch(NativeResults(calls={"c1": "external value"}, approvals={"c2": ToolApproved()}))
    executable = build(Recorder(), approval_tools(spy, b="declared"))

    async with executable.stream(previous_state=checkpoint(), deferred_resume=batch) as stream:
        stream.cancel()
        async for _ in stream:
            pass
        pending = stream.pending_deferred_input
    cancelled = stream.result

    assert cancelled.status == "cancelled" and spy.runs == []
    assert pending is not None and pending.recovery
    assert returns_by_id(cancelled.state.message_history) == {}
    assert cancelled.state.agent_context_state.entries == {}

    # The Host stored `pending` beside the checkpoint; resuming with it completes the batch.
    resumed = await executable.run(
        previous_state=cancelled.state,
        deferred_resume=DeferredToolResume(pending.requests, pending.results, recovery=True),
        tool_recovery="declared",
    )
    found = returns_by_id(resumed.state.message_history)
    assert found["c1"][0].content == "external value" and found["c2"][0].content == "b ran with 2"
    assert spy.runs == [("b", {"x": 2})]


async def test_seed_sample_interrupted_deferred_continuation():
    spy = Spy()
    executable = build(Recorder(), approval_tools(spy, b="declared"))
    checkpoint_state = checkpoint()
    accepted = accepted_batch(NativeResults(calls={"c1": "external value"}, approvals={"c2": True})).remaining(
        checkpoint_state.message_history
    )

    # Loaded from the Host's checkpoint and accepted-input storage.
    recovery_input = (
        DeferredToolResume(accepted.requests, accepted.results, recovery=True) if accepted is not None else None
    )
    result = await executable.run(
        bindings=RunBindings.embedded(),
        previous_state=checkpoint_state,
        deferred_resume=recovery_input,
        tool_recovery="declared",
    )

    assert result.status == "completed" and spy.runs == [("b", {"x": 2})]
    assert result.output == "done"
    assert isinstance(result.state.message_history[-1], ModelResponse)
    assert result.state.message_history[-1].parts == [TextPart("done")]


@pytest.mark.parametrize(("mode", "b_runs"), [("never", False), ("declared", True)])
async def test_interrupted_trailing_request_keeps_its_partial_results(mode, b_runs):
    spy = Spy()
    previous = checkpoint(
        ModelRequest(parts=[ToolReturnPart("a", "first run", tool_call_id="c1")], state="interrupted")
    )

    result = await build(Recorder(), [recovery_retryable(spy.tool("a")), recovery_retryable(spy.tool("b"))]).run(
        previous_state=previous, tool_recovery=mode
    )

    assert spy.runs == ([("b", {"x": 2})] if b_runs else [])
    found = returns_by_id(result.state.message_history)
    assert [part.content for part in found["c1"]] == ["first run"]
    assert len(found["c2"]) == 1 and is_unknown(found["c2"][0]) is not b_runs
