"""Structured suspension and deferred resume through `executable.run` / `stream` (S66–S72, T56–T70)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from pydantic_ai import (
    ApprovalRequired,
    CallDeferred,
    ModelRequest,
    ModelResponse,
    RunContext,
    Tool,
    ToolApproved,
    ToolCallPart,
    ToolDefinition,
    ToolDenied,
    ToolFailed,
    ToolReturn,
    UserPromptPart,
)
from pydantic_ai import DeferredToolResults as NativeResults
from pydantic_ai.capabilities import AbstractCapability, HandleDeferredToolCalls
from pydantic_ai.exceptions import SkipToolExecution
from pydantic_ai.toolsets import ExternalToolset, FunctionToolset

from runs.harness import (
    DEFERRED_UNAVAILABLE_MESSAGE,
    AgentDefinition,
    DeferredToolCall,
    DeferredToolResume,
    DefinitionError,
    ExecutableAgent,
    HarnessState,
    PendingDeferredCalls,
    RunBindings,
    RunError,
)
from tests.support.tool_recovery import CallingModel, Spy, returns_by_id

X_SCHEMA = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}


def build(model: CallingModel, *, tools: Sequence[Any] = (), toolsets: Sequence[Any] = ()) -> ExecutableAgent[str]:
    return AgentDefinition(model=model.model(), tools=list(tools), toolsets=list(toolsets)).build()


def approval_agent(spy: Spy, **settings: Any) -> tuple[ExecutableAgent[str], CallingModel]:
    model = CallingModel([ToolCallPart("delete", {"x": 1}, tool_call_id="d1")])
    return build(model, tools=[Tool(spy.tool("delete"), requires_approval=True, **settings)]), model


def external_agent() -> ExecutableAgent[str]:
    model = CallingModel([ToolCallPart("lookup", {"x": 4}, tool_call_id="e1")])
    return build(model, toolsets=[ExternalToolset([ToolDefinition(name="lookup", parameters_json_schema=X_SCHEMA)])])


async def test_approval_requiring_call_suspends_with_structured_requests():
    spy = Spy()
    agent, _ = approval_agent(spy)

    first = await agent.run("Ask for confirmation", bindings=RunBindings.embedded())

    assert (first.status, first.suspend_reason, first.output) == ("suspended", "deferred", None)
    assert first.state is not None and first.deferred is not None
    last_response = [m for m in first.state.message_history if isinstance(m, ModelResponse)][-1]
    assert first.deferred.approvals[0].model_call.tool_call_id == "d1"
    assert [call.tool_call_id for call in last_response.tool_calls] == ["d1"]
    assert first.deferred.approvals[0].target_identity == "tool/%3Cagent%3E/delete"
    assert first.deferred.calls == []
    assert spy.runs == []


async def test_seed_sample_approve_all_resume_runs_the_tool_once():
    spy = Spy()
    agent, _ = approval_agent(spy)
    first = await agent.run("Ask for confirmation", bindings=RunBindings.embedded())
    if first.status != "suspended" or first.state is None or first.deferred is None:
        raise RuntimeError("Expected a suspended run")

    results = first.deferred.build_results(approve_all=True)
    second = await agent.run(
        bindings=RunBindings.embedded(),
        previous_state=first.state,
        deferred_resume=DeferredToolResume(first.deferred, results),
    )

    assert second.status == "completed"
    assert spy.runs == [("delete", {"x": 1})]
    assert second.thread_id == first.thread_id and second.run_id != first.run_id
    assert second.output == "d1:success:delete ran with 1"


@pytest.mark.parametrize(("approval", "message"), [(False, "The tool call was denied."), (ToolDenied("no"), "no")])
async def test_denial_records_a_denied_return_and_the_model_continues(approval, message):
    spy = Spy()
    agent, _ = approval_agent(spy)
    first = await agent.run("go")

    second = await agent.run(
        previous_state=first.state,
        deferred_resume=DeferredToolResume(first.deferred, first.deferred.build_results(approvals={"d1": approval})),
    )

    assert spy.runs == []
    assert second.status == "completed" and second.output == f"d1:denied:{message}"
    (denied,) = returns_by_id(second.state.message_history)["d1"]
    assert (denied.outcome, denied.content) == ("denied", message)


async def test_override_args_replace_the_arguments_but_not_the_history():
    spy = Spy()
    agent, _ = approval_agent(spy)
    first = await agent.run("go")
    results = first.deferred.build_results(approvals={"d1": ToolApproved(override_args={"x": 2})})

    second = await agent.run(previous_state=first.state, deferred_resume=DeferredToolResume(first.deferred, results))

    assert spy.runs == [("delete", {"x": 2})]
    calls = next(m for m in second.state.message_history if isinstance(m, ModelResponse)).tool_calls
    assert calls[0].args_as_dict() == {"x": 1}


async def test_invalid_override_args_are_rejected_by_native_validation():
    spy = Spy()
    agent, _ = approval_agent(spy)
    first = await agent.run("go")
    results = first.deferred.build_results(approvals={"d1": ToolApproved(override_args={"x": "not a number"})})

    second = await agent.run(previous_state=first.state, deferred_resume=DeferredToolResume(first.deferred, results))

    assert spy.runs == []
    assert returns_by_id(second.state.message_history)["d1"][0].outcome == "retried"


@pytest.mark.parametrize(
    ("answer", "outcome", "content"),
    [
        ({"rows": 3}, "success", {"rows": 3}),
        (ToolReturn("found it", metadata={"took": 2}), "success", "found it"),
        (ToolFailed("lookup broke"), "failed", "lookup broke"),
    ],
)
async def test_external_call_answers(answer, outcome, content):
    agent = external_agent()
    first = await agent.run("look it up")
    assert first.status == "suspended" and [c.model_call.tool_call_id for c in first.deferred.calls] == ["e1"]
    assert first.deferred.calls[0].target_identity == "tool/native/lookup"

    second = await agent.run(
        previous_state=first.state,
        deferred_resume=DeferredToolResume(first.deferred, first.deferred.build_results(calls={"e1": answer})),
    )

    (part,) = returns_by_id(second.state.message_history)["e1"]
    assert (part.outcome, part.content) == (outcome, content)
    assert second.status == "completed"


async def test_fresh_resume_ignores_the_recovery_mode():
    spy = Spy()
    agent, _ = approval_agent(spy)
    first = await agent.run("go")

    await agent.run(
        previous_state=first.state,
        deferred_resume=DeferredToolResume(first.deferred, first.deferred.build_results(approve_all=True)),
        tool_recovery="never",
    )

    assert spy.runs == [("delete", {"x": 1})]


# --- bindings without deferred tools (T69, S72) ---------------------------------------------------------


async def test_without_deferred_support_every_deferred_item_is_refused_inline_and_the_run_continues():
    spy = Spy()

    def ask() -> str:
        raise CallDeferred(metadata={"question": "Which one?"}, kind="question")

    model = CallingModel(
        [
            ToolCallPart("delete", {"x": 1}, tool_call_id="d1"),
            ToolCallPart("lookup", {"x": 4}, tool_call_id="e1"),
            ToolCallPart("ask", {}, tool_call_id="q1"),
        ]
    )
    agent = build(
        model,
        tools=[Tool(spy.tool("delete"), requires_approval=True), ask],
        toolsets=[ExternalToolset([ToolDefinition(name="lookup", parameters_json_schema=X_SCHEMA)])],
    )

    result = await agent.run("go", bindings=RunBindings(deferred_tools_supported=False))

    assert (result.status, result.deferred, result.suspend_reason) == ("completed", None, None)
    assert spy.runs == []
    outcomes = {
        call_id: (part.outcome, part.content)
        for call_id, (part,) in returns_by_id(result.state.message_history).items()
    }
    assert outcomes == {
        "d1": ("denied", DEFERRED_UNAVAILABLE_MESSAGE),
        "e1": ("failed", DEFERRED_UNAVAILABLE_MESSAGE),
        "q1": ("failed", DEFERRED_UNAVAILABLE_MESSAGE),
    }


async def test_without_deferred_support_a_call_deferring_again_fails_the_run_with_its_state():
    """The defensive path: an item answered inline defers again, so the native output is still a request."""

    def pay(ctx: RunContext[Any]) -> str:
        if not ctx.tool_call_approved:
            raise ApprovalRequired()
        raise CallDeferred()

    model = CallingModel([ToolCallPart("pay", {}, tool_call_id="p1")])
    approve_all = HandleDeferredToolCalls(lambda ctx, requests: requests.build_results(approve_all=True))
    agent = AgentDefinition(model=model.model(), tools=[Tool(pay, takes_ctx=True)], capabilities=[approve_all]).build()

    result = await agent.run("go", bindings=RunBindings(deferred_tools_supported=False))

    assert result.status == "failed" and result.deferred is None
    assert (result.failure.code, result.failure.retry_hint) == ("deferred_tools_unsupported", "none")
    assert result.state is not None
    assert any(
        call.tool_call_id == "p1"
        for m in result.state.message_history
        if isinstance(m, ModelResponse)
        for call in m.tool_calls
    )


# --- invalid resumes: rejected with a stable code, state unchanged ----------------------------------------


@pytest.fixture
async def suspended():
    spy = Spy()
    model = CallingModel(
        [ToolCallPart("delete", {"x": 1}, tool_call_id="d1"), ToolCallPart("lookup", {"x": 4}, tool_call_id="e1")]
    )
    agent = build(
        model,
        tools=[Tool(spy.tool("delete"), requires_approval=True)],
        toolsets=[ExternalToolset([ToolDefinition(name="lookup", parameters_json_schema=X_SCHEMA)])],
    )
    first = await agent.run("go")
    assert first.status == "suspended"
    return agent, first, spy


def with_approval(first: Any, call: ToolCallPart) -> PendingDeferredCalls:
    """The suspended run's requests with its approval replaced by a direct request for `call`."""
    approval = DeferredToolCall(call, call, first.deferred.approvals[0].target_identity)
    return PendingDeferredCalls(calls=first.deferred.calls, approvals=[approval])


def resume_codes() -> list[tuple[str, Any]]:
    def results(**kwargs):
        kwargs.setdefault("calls", {"e1": 1})
        kwargs.setdefault("approvals", {"d1": True})
        return NativeResults(**kwargs)

    return [
        ("deferred_results_incomplete", lambda first: DeferredToolResume(first.deferred, results(calls={}))),
        (
            "deferred_results_incomplete",
            lambda first: DeferredToolResume(first.deferred, results(approvals={"d1": True, "zz": True})),
        ),
        (
            "deferred_approval_invalid",
            lambda first: DeferredToolResume(first.deferred, results(approvals={"d1": "ok"})),
        ),
        (
            "deferred_request_mismatch",
            lambda first: DeferredToolResume(with_approval(first, ToolCallPart("delete", {"x": 9}, "d1")), results()),
        ),
        (
            "deferred_request_missing",
            lambda first: DeferredToolResume(
                with_approval(first, ToolCallPart("delete", {"x": 1}, "d9")), results(approvals={"d9": True})
            ),
        ),
        ("deferred_resume_invalid", lambda first: first.deferred.build_results(approve_all=True)),
        # A batch that leaves out one open call of the last response (e1), answered in full for what it has.
        (
            "deferred_results_incomplete",
            lambda first: DeferredToolResume(
                PendingDeferredCalls(approvals=first.deferred.approvals), results(calls={})
            ),
        ),
    ]


@pytest.mark.parametrize(("code", "make"), resume_codes())
async def test_invalid_resume_is_rejected_before_any_work(suspended, code, make):
    agent, first, spy = suspended
    before = first.state.model_dump_json()

    with pytest.raises(RunError) as caught:
        agent.stream(previous_state=first.state, deferred_resume=make(first))
    assert caught.value.code == code
    with pytest.raises(RunError):
        await agent.run(previous_state=first.state, deferred_resume=make(first))

    assert first.state.model_dump_json() == before
    assert spy.runs == []


async def test_resume_without_previous_state(suspended):
    agent, first, _ = suspended
    resume = DeferredToolResume(first.deferred, NativeResults(calls={"e1": 1}, approvals={"d1": True}))

    with pytest.raises(RunError) as caught:
        await agent.run(deferred_resume=resume)

    assert caught.value.code == "deferred_state_required"


async def test_already_answered_request(suspended):
    agent, first, _ = suspended
    resume = DeferredToolResume(first.deferred, NativeResults(calls={"e1": 1}, approvals={"d1": False}))
    second = await agent.run(previous_state=first.state, deferred_resume=resume)
    before = second.state.model_dump_json()

    with pytest.raises(RunError) as caught:
        agent.stream(previous_state=second.state, deferred_resume=resume)

    # The second run answered both calls and the model replied: the batch no longer fits the last response.
    assert caught.value.code == "deferred_request_missing"
    completed = second.state.with_changes(message_history=list(second.state.message_history)[:-1])
    with pytest.raises(RunError) as caught:
        agent.stream(previous_state=completed, deferred_resume=resume)
    assert caught.value.code == "deferred_request_completed"
    assert second.state.model_dump_json() == before


async def test_current_tool_surface_must_still_fit(suspended):
    _, first, spy = suspended
    resume = DeferredToolResume(first.deferred, NativeResults(calls={"e1": 1}, approvals={"d1": True}))
    external = ExternalToolset([ToolDefinition(name="lookup", parameters_json_schema=X_SCHEMA)])
    before = first.state.model_dump_json()
    removed = build(CallingModel([]), toolsets=[external])
    now_external = build(
        CallingModel([]),
        toolsets=[
            ExternalToolset(
                [
                    ToolDefinition(name="lookup", parameters_json_schema=X_SCHEMA),
                    ToolDefinition(name="delete", parameters_json_schema=X_SCHEMA),
                ]
            )
        ],
    )

    for agent in (removed, now_external):
        with pytest.raises(DefinitionError) as caught:
            await agent.run(previous_state=first.state, deferred_resume=resume)
        assert caught.value.code == "deferred_surface_mismatch"

    assert spy.runs == [] and first.state.model_dump_json() == before


async def test_an_external_answer_for_a_tool_that_became_a_local_function_is_refused():
    model = CallingModel([ToolCallPart("lookup", {"x": 4}, tool_call_id="e1")])
    external = ExternalToolset([ToolDefinition(name="lookup", parameters_json_schema=X_SCHEMA)], id="records")
    first = await build(model, toolsets=[external]).run("go")
    assert first.deferred.calls[0].target_kind == "external"
    resume = DeferredToolResume(first.deferred, NativeResults(calls={"e1": 1}))
    lookup_ran: list[int] = []

    def lookup(x: int) -> str:
        lookup_ran.append(x)
        return "local"

    # Same toolset id and name, so the same identity: only the kind tells the two tools apart.
    now_local = build(CallingModel([]), toolsets=[FunctionToolset([lookup], id="records")])

    with pytest.raises(DefinitionError) as caught:
        await now_local.run(previous_state=first.state, deferred_resume=resume)

    assert caught.value.code == "deferred_surface_mismatch"
    assert "from kind 'external' to 'function'" in str(caught.value)
    assert lookup_ran == []


async def test_questions_are_told_apart_from_external_calls_and_approvals():
    def ask(question: str) -> str:
        raise CallDeferred(metadata={"shown": question}, kind="question")

    model = CallingModel(
        [
            ToolCallPart("ask", {"question": "Which one?"}, tool_call_id="q1"),
            ToolCallPart("lookup", {"x": 4}, tool_call_id="e1"),
            ToolCallPart("delete", {"x": 1}, tool_call_id="d1"),
        ]
    )
    spy = Spy()
    agent = build(
        model,
        tools=[Tool(ask), Tool(spy.tool("delete"), requires_approval=True)],
        toolsets=[ExternalToolset([ToolDefinition(name="lookup", parameters_json_schema=X_SCHEMA)])],
    )
    first = await agent.run("go")

    assert {call_id: first.deferred.kind(call_id) for call_id in ("q1", "e1", "d1")} == {
        "q1": "question",
        "e1": "external",
        "d1": "approval",
    }
    assert first.deferred.target_requests().kind("q1") == "question"
    results = first.deferred.build_results(calls={"q1": "The blue one.", "e1": 7}, approve_all=True)
    second = await agent.run(previous_state=first.state, deferred_resume=DeferredToolResume(first.deferred, results))
    assert second.status == "completed"
    assert "q1:success:The blue one." in second.output


def host_built_state(call: ToolCallPart) -> HarnessState:
    """A history a Host wrote itself: a prompt and a response with `call`, no Harness metadata anywhere."""
    return HarnessState.new(
        thread_id="thr_hostbuilt1",
        message_history=[ModelRequest(parts=[UserPromptPart("remove it")]), ModelResponse(parts=[call])],
    )


async def test_host_built_history_with_native_bool_approval():
    spy = Spy()
    agent, _ = approval_agent(spy)
    call = ToolCallPart("delete", {"x": 5}, tool_call_id="host-1")
    state = host_built_state(call)

    def resume(identity: str) -> DeferredToolResume:
        requests = PendingDeferredCalls(approvals=[DeferredToolCall(call, call, identity)])
        return DeferredToolResume(requests, NativeResults(approvals={"host-1": True}))

    with pytest.raises(DefinitionError) as caught:
        await agent.run(previous_state=state, deferred_resume=resume("tool/elsewhere/delete"))
    assert caught.value.code == "deferred_surface_mismatch"
    assert spy.runs == []

    result = await agent.run(previous_state=state, deferred_resume=resume("tool/%3Cagent%3E/delete"))
    assert result.status == "completed" and spy.runs == [("delete", {"x": 5})]


async def test_a_host_built_request_needs_no_identity_of_the_tool():
    """S70: no attestation of the tool is required; the call is checked against the current tools alone."""
    spy = Spy()
    agent, _ = approval_agent(spy)
    call = ToolCallPart("delete", {"x": 6}, tool_call_id="host-2")
    requests = PendingDeferredCalls(approvals=[DeferredToolCall(call, call)])

    result = await agent.run(
        previous_state=host_built_state(call),
        deferred_resume=DeferredToolResume(requests, NativeResults(approvals={"host-2": True})),
    )

    assert result.status == "completed" and spy.runs == [("delete", {"x": 6})]


class ForbidDeletes(AbstractCapability[Any]):
    """The policy in force now: deletes are refused, whoever approved them."""

    async def before_tool_execute(self, ctx, *, call, tool_def, args):
        if call.tool_name == "delete":
            raise SkipToolExecution(ToolDenied("refused by the current policy"))
        return args


async def test_an_approval_does_not_bypass_the_policy_in_force_at_resume():
    """T68 (S70, S61): a call approved under the old definition is refused by the policy of the resuming run."""
    spy = Spy()
    agent, model = approval_agent(spy)
    first = await agent.run("go")
    approved = DeferredToolResume(first.deferred, first.deferred.build_results(approve_all=True))
    current = AgentDefinition(
        model=model.model(),
        tools=[Tool(spy.tool("delete"), requires_approval=True)],
        capabilities=[ForbidDeletes()],
    ).build()

    second = await current.run(previous_state=first.state, deferred_resume=approved)

    assert spy.runs == []
    assert second.status == "completed" and second.output == "d1:denied:refused by the current policy"
    (refused,) = returns_by_id(second.state.message_history)["d1"]
    assert (refused.outcome, refused.content) == ("denied", "refused by the current policy")
