"""Structured deferred requests, `DeferredToolResume`, `remaining()` and the resume preflight (S66–S71, S75)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from pydantic import TypeAdapter
from pydantic_ai import DeferredToolRequests as NativeRequests
from pydantic_ai import DeferredToolResults as NativeResults
from pydantic_ai import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    Tool,
    ToolApproved,
    ToolCallPart,
    ToolDefinition,
    ToolDenied,
    ToolFailed,
    ToolReturn,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo
from pydantic_ai.toolsets import AbstractToolset, ExternalToolset, FunctionToolset

from runs.harness import (
    MAX_DEFERRED_REQUESTS,
    AgentDefinition,
    DeferredToolCall,
    DeferredToolResume,
    DefinitionError,
    ExecutableAgent,
    HarnessState,
    PendingDeferredCalls,
    RunError,
    preflight_deferred_resume,
    scripted_model,
)
from tests.support.tool_recovery import checkpoint_history

A_ID = "tool/native/a"
B_ID = "tool/native/b"


def call(name: str, tool_call_id: str, **args: object) -> ToolCallPart:
    return ToolCallPart(name, args or {"x": 1 if name == "a" else 2}, tool_call_id=tool_call_id)


def entry(name: str, tool_call_id: str, identity: str | None = None, **args: object) -> DeferredToolCall:
    part = call(name, tool_call_id, **args)
    return DeferredToolCall(part, part, identity or f"tool/native/{name}")


def requests(**kwargs) -> PendingDeferredCalls:
    """External call c1→a and approval c2→b, matching `checkpoint_history()`."""
    kwargs.setdefault("calls", [entry("a", "c1")])
    kwargs.setdefault("approvals", [entry("b", "c2")])
    return PendingDeferredCalls(**kwargs)


def answers(**kwargs) -> NativeResults:
    kwargs.setdefault("calls", {"c1": "external value"})
    kwargs.setdefault("approvals", {"c2": True})
    return NativeResults(**kwargs)


def state(*tail) -> HarnessState:
    return HarnessState.new(thread_id="thr_deferred1", message_history=checkpoint_history(*tail))


def code_of(resume: object, previous: HarnessState | None) -> str:
    with pytest.raises(RunError) as caught:
        preflight_deferred_resume(resume, previous)
    return caught.value.code


# --- structured requests -------------------------------------------------------------------------------


def test_export_keeps_calls_approvals_metadata_and_identities():
    native = NativeRequests(
        calls=[call("ext", "e1")],
        approvals=[call("a", "c1")],
        metadata={"c1": {"reason": "large"}},
    )
    definitions = {"a": ToolDefinition(name="a", toolset_id="acme.catalog")}

    exported = PendingDeferredCalls.export(native, definitions=definitions)

    assert [item.model_call.tool_call_id for item in exported.calls] == ["e1"]
    assert [item.target_call for item in exported.approvals] == [native.approvals[0]]
    assert not exported.approvals[0].forwarded
    assert exported.approvals[0].target_identity == "tool/acme.catalog/a"
    assert exported.calls[0].target_identity == "tool/native/ext"
    assert exported.metadata == {"c1": {"reason": "large"}}
    native.metadata["c1"]["reason"] = "changed"
    assert exported.metadata == {"c1": {"reason": "large"}}


def test_tool_identity_quotes_source_and_name():
    native = NativeRequests(approvals=[call("a b/c", "c1")])
    definitions = {"a b/c": ToolDefinition(name="a b/c", toolset_id="<agent>")}
    exported = PendingDeferredCalls.export(native, definitions=definitions)
    assert exported.approvals[0].target_identity == "tool/%3Cagent%3E/a%20b%2Fc"


def test_build_results_delegates_to_native_category_checks():
    batch = requests(approvals=[entry("b", "c2"), entry("b", "c3")])

    results = batch.build_results(approvals={"c3": ToolDenied("no")}, calls={"c1": 5}, approve_all=True)

    assert results.calls == {"c1": 5}
    assert results.approvals == {"c2": ToolApproved(), "c3": ToolDenied("no")}
    assert batch.build_results(approve_all=True).calls == {}
    with pytest.raises(ValueError):
        batch.build_results(approvals={"c1": True})
    assert batch.target_requests().approvals == [call("b", "c2"), call("b", "c3")]


# --- DeferredToolResume ----------------------------------------------------------------------------------


def test_resume_rejects_wrong_types_and_detaches_its_inputs():
    with pytest.raises(TypeError):
        DeferredToolResume(NativeRequests(), answers())
    with pytest.raises(TypeError):
        DeferredToolResume(requests(), {"calls": {}})
    batch, results = requests(), answers()

    resume = DeferredToolResume(batch, results)
    batch.calls.clear()
    results.approvals["c2"] = False

    assert [item.model_call.tool_call_id for item in resume.requests.calls] == ["c1"]
    assert resume.results.approvals == {"c2": True}
    assert resume.recovery is False


def test_resume_round_trips_through_pydantic_json():
    adapter = TypeAdapter(DeferredToolResume)
    resume = DeferredToolResume(
        requests(metadata={"c2": {"k": "v"}}, questions=["c1"]),
        answers(calls={"c1": ToolFailed("gone")}, approvals={"c2": ToolApproved(override_args={"x": 3})}),
        recovery=True,
    )

    loaded = adapter.validate_json(adapter.dump_json(resume))

    assert loaded.requests == resume.requests
    assert loaded.requests.kind("c1") == "question"
    assert loaded.results.approvals == resume.results.approvals
    assert isinstance(loaded.results.calls["c1"], ToolFailed)
    assert loaded.results.calls["c1"].message == "gone"
    assert loaded.recovery is True


def test_remaining_follows_the_history():
    resume = DeferredToolResume(
        requests(metadata={"c1": {"m": 1}, "c2": {"m": 2}}),
        answers(metadata={"c1": {"r": 1}, "c2": {"r": 2}}),
        recovery=True,
    )

    both = resume.remaining(checkpoint_history())
    assert both is not None and both.requests == resume.requests and both.recovery

    only_c2 = resume.remaining(checkpoint_history(ModelRequest(parts=[ToolReturnPart("a", "v", tool_call_id="c1")])))
    assert only_c2 is not None
    assert only_c2.requests.calls == [] and [e.model_call.tool_call_id for e in only_c2.requests.approvals] == ["c2"]
    assert only_c2.requests.metadata == {"c2": {"m": 2}}
    assert (only_c2.results.calls, only_c2.results.approvals, only_c2.results.metadata) == (
        {},
        {"c2": True},
        {"c2": {"r": 2}},
    )

    incorporated = checkpoint_history(
        ModelRequest(parts=[ToolReturnPart("a", "v", tool_call_id="c1"), ToolReturnPart("b", "w", tool_call_id="c2")])
    )
    assert resume.remaining(incorporated) is None
    superseded = [*incorporated, ModelResponse(parts=[TextPart("later")])]
    assert resume.remaining(superseded) is None
    with pytest.raises(RunError) as caught:
        resume.remaining([ModelRequest(parts=[UserPromptPart("hi")])])
    assert caught.value.code == "deferred_request_missing"


def test_model_results_rekeys_forwarded_items_and_drops_their_override():
    forwarded = DeferredToolCall(
        call("run_code", "m1"), ToolCallPart("b", {"x": 2}, tool_call_id="t1"), "tool/native/b"
    )
    resume = DeferredToolResume(
        PendingDeferredCalls(approvals=[forwarded, entry("a", "c1")]),
        NativeResults(
            approvals={"t1": ToolApproved(override_args={"x": 9}), "c1": ToolApproved(override_args={"x": 5})},
            metadata={"t1": {"who": "op"}},
        ),
    )

    results = resume.model_results()

    assert results.approvals == {"m1": ToolApproved(), "c1": ToolApproved(override_args={"x": 5})}
    assert results.metadata == {"m1": {"who": "op"}}


# --- preflight -------------------------------------------------------------------------------------------


def test_valid_resume_passes_and_returns_the_batch():
    resume = DeferredToolResume(requests(), answers())
    assert preflight_deferred_resume(resume, state()) is resume
    assert preflight_deferred_resume(None, None) is None


def test_invalid_resume_objects_and_missing_state():
    assert code_of({"requests": []}, state()) == "deferred_resume_invalid"
    assert code_of(DeferredToolResume(requests(), answers()), None) == "deferred_state_required"


@pytest.mark.parametrize(
    ("batch", "code"),
    [
        (PendingDeferredCalls(), "deferred_requests_empty"),
        (
            PendingDeferredCalls(approvals=[entry("b", f"c{i}") for i in range(MAX_DEFERRED_REQUESTS + 1)]),
            "deferred_requests_too_large",
        ),
        (requests(approvals=[entry("b", "c2"), entry("b", "c2")]), "deferred_request_duplicate"),
        (requests(approvals=[entry("a", "c1")]), "deferred_request_category_overlap"),
        (requests(approvals=[entry("b", "c2", identity=" ")]), "deferred_request_invalid"),
        (requests(approvals=[entry("b", " ")]), "deferred_request_invalid"),
        (requests(approvals=[entry("b", "c2", x=math.nan)]), "deferred_request_invalid"),
        (
            requests(approvals=[DeferredToolCall(call("b", "c2"), call("b", "c2", x=3), B_ID)]),
            "deferred_request_invalid",
        ),
        (
            requests(
                approvals=[DeferredToolCall(call("b", "c2"), ToolCallPart("b", "{not json", tool_call_id="c2"), B_ID)]
            ),
            "deferred_request_invalid",
        ),
        (requests(metadata={"zz": {}}), "deferred_metadata_invalid"),
        (requests(metadata={"c1": {"v": math.inf}}), "deferred_metadata_invalid"),
        (requests(metadata={"c1": {"v": "x" * 70_000}}), "deferred_metadata_invalid"),
    ],
)
def test_request_batch_shape(batch, code):
    results = NativeResults(
        calls={item.target_call.tool_call_id: 1 for item in batch.calls},
        approvals={item.target_call.tool_call_id: True for item in batch.approvals},
    )
    assert code_of(DeferredToolResume(batch, results), state()) == code


@pytest.mark.parametrize(
    ("results", "code"),
    [
        (answers(approvals={}), "deferred_results_incomplete"),
        (answers(calls={"c1": 1, "c9": 2}), "deferred_results_incomplete"),
        (answers(calls={"c1": 1, "c2": 2}, approvals={}), "deferred_results_incomplete"),
        (answers(approvals={"c2": "yes"}), "deferred_approval_invalid"),
        (answers(approvals={"c2": 1}), "deferred_approval_invalid"),
        (answers(approvals={"c2": ToolApproved(override_args={"x": math.nan})}), "deferred_results_invalid"),
        (answers(calls={"c1": math.inf}), "deferred_results_invalid"),
        (answers(calls={"c1": ToolReturn(object())}), "deferred_results_invalid"),
        (answers(calls={"c1": ToolDenied("no")}), "deferred_results_invalid"),
        (answers(metadata={"c7": {}}), "deferred_metadata_invalid"),
    ],
)
def test_results_must_answer_every_item_once_with_valid_values(results, code):
    assert code_of(DeferredToolResume(requests(), results), state()) == code


def test_native_result_values_are_accepted():
    results = answers(
        calls={"c1": ToolReturn({"rows": 3}, metadata={"took": 1})},
        approvals={"c2": ToolDenied("not now")},
        metadata={"c2": {"approver": "alice"}},
    )
    assert preflight_deferred_resume(DeferredToolResume(requests(), results), state()) is not None
    for value in (ToolFailed("broken"), [1, "two"], None):
        resume = DeferredToolResume(requests(), answers(calls={"c1": value}))
        assert preflight_deferred_resume(resume, state()) is not None


def test_history_checks():
    no_response = HarnessState.new(
        thread_id="thr_deferred1", message_history=[ModelRequest(parts=[UserPromptPart("x")])]
    )
    answered = state(ModelRequest(parts=[ToolReturnPart("a", "v", tool_call_id="c1")]))
    later = state(ModelRequest(parts=[UserPromptPart("more")]), ModelResponse(parts=[TextPart("other")]))
    duplicated = HarnessState.new(
        thread_id="thr_deferred1",
        message_history=[
            ModelRequest(parts=[UserPromptPart("x")]),
            ModelResponse(parts=[call("a", "c1"), call("b", "c2"), call("b", "c2")]),
        ],
    )

    assert code_of(DeferredToolResume(requests(), answers()), no_response) == "deferred_request_missing"
    assert code_of(DeferredToolResume(requests(), answers()), later) == "deferred_request_missing"
    assert code_of(DeferredToolResume(requests(), answers()), answered) == "deferred_request_completed"
    assert code_of(DeferredToolResume(requests(), answers()), duplicated) == "deferred_request_duplicate"
    changed_args = requests(approvals=[entry("b", "c2", x=3)])
    assert code_of(DeferredToolResume(changed_args, answers()), state()) == "deferred_request_mismatch"
    changed_name = requests(approvals=[entry("a", "c2", x=2)])
    assert code_of(DeferredToolResume(changed_name, answers()), state()) == "deferred_request_mismatch"


def test_failed_preflight_leaves_the_state_unchanged():
    previous = state()
    before = previous.model_dump_json()
    for resume in (
        DeferredToolResume(requests(), answers(approvals={})),
        DeferredToolResume(requests(approvals=[entry("b", "c2", x=3)]), answers()),
    ):
        with pytest.raises(RunError):
            preflight_deferred_resume(resume, previous)
    assert previous.model_dump_json() == before


def test_recovery_batch_is_reduced_to_what_history_lacks():
    resume = DeferredToolResume(requests(), answers(), recovery=True)
    partly = state(ModelRequest(parts=[ToolReturnPart("a", "external value", tool_call_id="c1")]))
    done = state(
        ModelRequest(parts=[ToolReturnPart("a", "v", tool_call_id="c1"), ToolReturnPart("b", "w", tool_call_id="c2")])
    )

    reduced = preflight_deferred_resume(resume, partly)

    assert reduced is not None and reduced.recovery
    assert reduced.requests.calls == [] and reduced.results.calls == {}
    assert preflight_deferred_resume(resume, done) is None


# --- tool surface ---------------------------------------------------------------------------------------


async def resume_on(toolsets: list[AbstractToolset[Any]], resume: DeferredToolResume) -> str:
    """Resume `state()` on a run whose tool surface is `toolsets`; the run's output."""

    def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("done")])

    agent: ExecutableAgent[str] = AgentDefinition(model=scripted_model(script), toolsets=toolsets).build()
    result = await agent.run(previous_state=state(), deferred_resume=resume)
    assert result.status == "completed" and isinstance(result.output, str), result.failure
    return result.output


async def test_surface_check_wants_the_same_tool_identity_and_category():
    def b(x: int) -> str:
        return f"b ran with {x}"

    # External call c1→a and approval c2→b, from the toolsets the identities name.
    external_a = ExternalToolset([ToolDefinition(name="a")], id="native")
    approved_b = FunctionToolset([Tool(b, requires_approval=True)], id="native")
    external_b = ExternalToolset([ToolDefinition(name="b")], id="native")
    assert await resume_on([external_a, approved_b], DeferredToolResume(requests(), answers())) == "done"

    mismatches = [
        (requests(approvals=[entry("b", "c2", identity="tool/other/b")]), answers(), [external_a, approved_b]),
        (requests(), answers(), [external_a]),
        (requests(), answers(), [external_a, external_b]),
        (requests(), answers(), [approved_b]),
    ]
    for batch, results, tools in mismatches:
        with pytest.raises(DefinitionError) as caught:
            await resume_on(tools, DeferredToolResume(batch, results))
        assert caught.value.code == "deferred_surface_mismatch"
    gone = DeferredToolResume(requests(), answers(calls={"c1": ToolFailed("gone")}))
    assert await resume_on([approved_b], gone) == "done"
