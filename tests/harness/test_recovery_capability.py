"""The recovery plan's capability inside a real pydantic-ai run (S45–S61, S77–S78; T36–T50, T54, T72–T75).

These drive a plain pydantic-ai `Agent` the way the harness stream does: history and native results from the
plan, the plan's capability added to the run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from pydantic_ai import (
    Agent,
    ApprovalRequired,
    FunctionToolset,
    ModelRequest,
    RunContext,
    Tool,
    ToolApproved,
    ToolCallPart,
    ToolDefinition,
    ToolDenied,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai import DeferredToolRequests as NativeRequests
from pydantic_ai import DeferredToolResults as NativeResults
from pydantic_ai.capabilities import AbstractCapability, SetToolMetadata
from pydantic_ai.toolsets import ExternalToolset

from runs.harness import (
    RECOVERY_RETRY_SAFE_METADATA_KEY,
    DeferredToolCall,
    DeferredToolResume,
    DefinitionError,
    PendingDeferredCalls,
    RunError,
    ToolRecoveryMode,
    prepare_tool_recovery,
    recovery_retryable,
    tool_call_approved,
)
from tests.support.tool_recovery import (
    Recorder,
    Spy,
    checkpoint_calls,
    checkpoint_history,
    is_unknown,
    returns_by_id,
    unknown,
)

MODES = ("declared", "never", "always")


async def recover(
    history: Sequence[Any],
    mode: ToolRecoveryMode,
    *,
    tools: Sequence[Any],
    accepted: DeferredToolResume | None = None,
    prompt: str | None = None,
    recorder: Recorder | None = None,
    capabilities: Sequence[Any] = (),
    toolsets: Sequence[Any] = (),
):
    plan = prepare_tool_recovery(history, mode, accepted)
    recorder = recorder or Recorder()
    agent = Agent(
        recorder.model(),
        output_type=[str, NativeRequests],
        tools=list(tools),
        toolsets=list(toolsets),
        capabilities=list(capabilities),
    )
    capability = plan.capability()
    result = await agent.run(
        prompt,
        message_history=list(plan.history),
        deferred_tool_results=plan.deferred_tool_results,
        capabilities=[capability],
    )
    return result, recorder, capability


def standard_tools(spy: Spy, *, a_declared: bool = True, **a_settings: Any) -> list[Tool]:
    a = Tool(spy.tool("a"), **a_settings)
    return [recovery_retryable(a) if a_declared else a, Tool(spy.tool("b"))]


async def test_declared_replays_only_the_declared_tool():
    spy = Spy()

    result, recorder, _ = await recover(checkpoint_history(), "declared", tools=standard_tools(spy))

    assert spy.runs == [("a", {"x": 1})]
    sent = recorder.first_request_results()
    assert sent["c1"].outcome == "success" and sent["c1"].content == "a ran with 1"
    assert is_unknown(sent["c2"])
    assert result.output == "done"


async def test_never_replays_nothing():
    spy = Spy()

    _, recorder, _ = await recover(checkpoint_history(), "never", tools=standard_tools(spy))

    assert spy.runs == []
    assert all(is_unknown(part) for part in recorder.first_request_results().values())
    assert set(recorder.first_request_results()) == {"c1", "c2"}


async def test_always_replays_every_available_tool_with_its_original_ids():
    spy = Spy()

    _, recorder, _ = await recover(checkpoint_history(), "always", tools=standard_tools(spy, a_declared=False))

    assert sorted(spy.runs) == [("a", {"x": 1}), ("b", {"x": 2})]
    sent = recorder.first_request_results()
    assert (sent["c1"].content, sent["c2"].content) == ("a ran with 1", "b ran with 2")


async def test_unavailable_tools_get_the_unknown_result():
    spy = Spy()
    _, recorder, _ = await recover(checkpoint_history(), "always", tools=[recovery_retryable(spy.tool("a"))])
    assert spy.names() == ["a"] and is_unknown(recorder.first_request_results()["c2"])

    spy = Spy()
    _, recorder, _ = await recover(checkpoint_history(), "declared", tools=[Tool(spy.tool("b"))])
    assert spy.runs == [] and is_unknown(recorder.first_request_results()["c1"])


@pytest.mark.parametrize("mode", MODES)
async def test_partial_results_are_kept_and_not_rerun(mode):
    spy = Spy()
    history = checkpoint_history(ModelRequest(parts=[ToolReturnPart("a", "first run", tool_call_id="c1")]))

    result, _, _ = await recover(history, mode, tools=standard_tools(spy, a_declared=True))

    assert "a" not in spy.names()
    found = returns_by_id(result.all_messages())
    assert [part.content for part in found["c1"]] == ["first run"]
    assert len(found["c2"]) == 1
    assert is_unknown(found["c2"][0]) == (mode != "always")


async def test_existing_unknown_result_is_not_reopened_even_with_always():
    spy = Spy()
    history = checkpoint_history(ModelRequest(parts=[ToolReturnPart("a", "ok", tool_call_id="c1"), unknown("b", "c2")]))

    result, _, _ = await recover(history, "always", tools=standard_tools(spy))

    assert spy.runs == []
    assert len(returns_by_id(result.all_messages())["c2"]) == 1


@pytest.mark.parametrize(("metadata_value", "executes"), [(True, True), ("true", False), (1, False), (False, False)])
async def test_declaration_through_set_tool_metadata(metadata_value, executes):
    spy = Spy()
    set_metadata = SetToolMetadata(tools=["b"], **{RECOVERY_RETRY_SAFE_METADATA_KEY: metadata_value})

    _, recorder, _ = await recover(
        checkpoint_history(), "declared", tools=standard_tools(spy), capabilities=[set_metadata]
    )

    assert ("b" in spy.names()) is executes
    assert is_unknown(recorder.first_request_results()["c2"]) is not executes


async def test_declaration_through_a_dynamic_toolset() -> None:
    spy = Spy()
    recorder = Recorder()
    agent = Agent(recorder.model(), output_type=[str, NativeRequests], tools=[Tool(spy.tool("a"))])

    @agent.toolset
    def current_tools(ctx) -> FunctionToolset:
        return FunctionToolset([recovery_retryable(spy.tool("b"))])

    plan = prepare_tool_recovery(checkpoint_history(), "declared")
    await agent.run(
        message_history=list(plan.history),
        deferred_tool_results=plan.deferred_tool_results,
        capabilities=[plan.capability()],
    )

    assert spy.names() == ["b"]
    assert is_unknown(recorder.first_request_results()["c1"])


@pytest.mark.parametrize("mode", MODES)
async def test_new_calls_after_recovery_run_normally(mode):
    spy = Spy()
    recorder = Recorder(calls_after_results=[ToolCallPart("b", {"x": 3}, tool_call_id="c3")])

    await recover(checkpoint_history(), mode, tools=standard_tools(spy), recorder=recorder)

    assert ("b", {"x": 3}) in spy.runs


async def test_replayed_tool_that_now_needs_approval_suspends():
    spy = Spy()

    result, _, capability = await recover(
        checkpoint_history(), "declared", tools=standard_tools(spy, requires_approval=True)
    )

    assert spy.runs == []
    assert isinstance(result.output, NativeRequests)
    assert [call.tool_call_id for call in result.output.approvals] == ["c1"]
    assert is_unknown(returns_by_id(result.all_messages())["c2"][0])
    exported = PendingDeferredCalls.export(result.output, definitions=capability.definitions)
    assert exported.approvals[0].target_identity == "tool/%3Cagent%3E/a"


@pytest.mark.parametrize(
    ("mode", "declared", "suspends"), [("always", False, True), ("declared", True, True), ("declared", False, False)]
)
async def test_replayed_external_tool_suspends(mode, declared, suspends):
    metadata = {RECOVERY_RETRY_SAFE_METADATA_KEY: True} if declared else None
    external = ExternalToolset(
        [
            ToolDefinition(
                name="a",
                parameters_json_schema={"type": "object", "properties": {"x": {"type": "integer"}}},
                metadata=metadata,
            )
        ]
    )
    spy = Spy()

    result, recorder, _ = await recover(checkpoint_history(), mode, tools=[Tool(spy.tool("b"))], toolsets=[external])

    if suspends:
        assert isinstance(result.output, NativeRequests)
        assert [call.tool_call_id for call in result.output.calls] == ["c1"]
    else:
        assert result.output == "done"
        assert is_unknown(recorder.first_request_results()["c1"])


async def test_replay_revalidates_the_stored_arguments():
    spy = Spy()

    def a(label: str) -> str:
        spy.runs.append(("a", {"label": label}))
        return label

    _, recorder, _ = await recover(checkpoint_history(), "always", tools=[Tool(a), Tool(spy.tool("b"))])

    assert "a" not in spy.names()
    assert recorder.first_request_results()["c1"].outcome == "retried"


async def test_new_input_follows_the_recovered_results():
    spy = Spy()

    _, recorder, _ = await recover(checkpoint_history(), "declared", tools=standard_tools(spy), prompt="continue")

    final_request = recorder.requests[0][-1]
    assert isinstance(final_request, ModelRequest)
    kinds = [type(part).__name__ for part in final_request.parts]
    assert kinds.index("UserPromptPart") > max(i for i, kind in enumerate(kinds) if kind == "ToolReturnPart")
    assert [p.content for p in final_request.parts if isinstance(p, UserPromptPart)] == ["continue"]


def accepted_batch(results: NativeResults) -> DeferredToolResume:
    a_call, b_call = checkpoint_calls()
    return DeferredToolResume(
        PendingDeferredCalls(
            calls=[DeferredToolCall(a_call, a_call, "tool/%3Cagent%3E/a")],
            approvals=[DeferredToolCall(b_call, b_call, "tool/%3Cagent%3E/b")],
        ),
        results,
        recovery=True,
    )


async def test_retained_facts_and_denials_count_under_never():
    spy = Spy()
    batch = accepted_batch(NativeResults(calls={"c1": "external value"}, approvals={"c2": ToolDenied("not today")}))

    _, recorder, _ = await recover(checkpoint_history(), "never", tools=standard_tools(spy), accepted=batch)

    sent = recorder.first_request_results()
    assert spy.runs == []
    assert (sent["c1"].outcome, sent["c1"].content) == ("success", "external value")
    # Section 7 item 11: on pydantic-ai 2.68 the retained denial must be a *denied* return.
    assert (sent["c2"].outcome, sent["c2"].content) == ("denied", "not today")


async def test_retained_positive_approval_follows_the_recovery_policy():
    batch = accepted_batch(NativeResults(calls={"c1": "external value"}, approvals={"c2": ToolApproved()}))

    spy = Spy()
    _, recorder, _ = await recover(checkpoint_history(), "never", tools=standard_tools(spy), accepted=batch)
    assert spy.runs == [] and is_unknown(recorder.first_request_results()["c2"])

    spy = Spy()
    tools = [Tool(spy.tool("a")), recovery_retryable(spy.tool("b"))]
    _, recorder, _ = await recover(checkpoint_history(), "declared", tools=tools, accepted=batch)
    assert spy.runs == [("b", {"x": 2})]

    spy = Spy()
    tools = [Tool(spy.tool("a")), recovery_retryable(Tool(spy.tool("b"), requires_approval=True))]
    result, _, _ = await recover(checkpoint_history(), "declared", tools=tools, accepted=batch)
    assert spy.runs == []
    assert [call.tool_call_id for call in result.output.approvals] == ["c2"]


async def test_fresh_resume_checks_the_current_tool_surface():
    a_call = checkpoint_history()[1].tool_calls[0]
    fresh = DeferredToolResume(
        PendingDeferredCalls(approvals=[DeferredToolCall(a_call, a_call, "tool/%3Cagent%3E/a")]),
        NativeResults(approvals={"c1": True}),
    )
    external = ExternalToolset([ToolDefinition(name="a")])
    history = checkpoint_history(ModelRequest(parts=[ToolReturnPart("b", "ok", tool_call_id="c2")]))

    with pytest.raises(DefinitionError) as caught:
        await recover(history, "declared", tools=[], toolsets=[external], accepted=fresh)
    assert caught.value.code == "deferred_surface_mismatch"

    spy = Spy()
    result, _, _ = await recover(history, "never", tools=[Tool(spy.tool("a"), requires_approval=True)], accepted=fresh)
    assert spy.runs == [("a", {"x": 1})] and result.output == "done"


async def test_replay_is_never_reported_as_an_approval_to_the_tool():
    spy = Spy()

    def a(ctx: RunContext[None], x: int) -> str:
        if not ctx.tool_call_approved:
            raise ApprovalRequired(metadata={"gate": "amount"})
        spy.runs.append(("a", {"x": x}))
        return "approved run"

    result, _, _ = await recover(checkpoint_history(), "declared", tools=[recovery_retryable(a), Tool(spy.tool("b"))])

    assert spy.runs == []
    assert [call.tool_call_id for call in result.output.approvals] == ["c1"]
    assert result.output.metadata == {"c1": {"gate": "amount"}}


async def test_policy_gates_see_a_replay_as_not_approved():
    spy = Spy()
    seen: list[tuple[bool, bool]] = []

    class AmountGate(AbstractCapability[Any]):
        async def after_tool_validate(self, ctx, *, call, tool_def, args):
            seen.append((ctx.tool_call_approved, tool_call_approved(ctx)))
            if args.get("x", 0) > 0 and not tool_call_approved(ctx):
                raise ApprovalRequired(metadata={"rule": "amount"})
            return args

    result, _, _ = await recover(
        checkpoint_history(), "always", tools=standard_tools(spy, a_declared=False), capabilities=[AmountGate()]
    )

    assert spy.runs == []
    assert sorted(call.tool_call_id for call in result.output.approvals) == ["c1", "c2"]
    assert seen == [(True, False), (True, False)]


async def test_policy_gates_accept_a_real_approval():
    spy = Spy()

    class AmountGate(AbstractCapability[Any]):
        async def after_tool_validate(self, ctx, *, call, tool_def, args):
            if not tool_call_approved(ctx):
                raise ApprovalRequired()
            return args

    a_call = checkpoint_history()[1].tool_calls[0]
    fresh = DeferredToolResume(
        PendingDeferredCalls(approvals=[DeferredToolCall(a_call, a_call, "tool/%3Cagent%3E/a")]),
        NativeResults(approvals={"c1": True}),
    )
    history = checkpoint_history(ModelRequest(parts=[ToolReturnPart("b", "ok", tool_call_id="c2")]))

    result, _, _ = await recover(
        history, "declared", tools=standard_tools(spy), accepted=fresh, capabilities=[AmountGate()]
    )

    assert spy.runs == [("a", {"x": 1})] and result.output == "done"


async def test_a_replay_the_surface_never_decided_fails_closed():
    capability = prepare_tool_recovery(checkpoint_history(), "declared").capability()
    a_call = checkpoint_history()[1].tool_calls[0]

    with pytest.raises(RunError) as caught:
        await capability.after_tool_validate(None, call=a_call, tool_def=ToolDefinition(name="a"), args={"x": 1})

    assert caught.value.code == "tool_recovery_unresolved"
