"""Safe failure candidates from interrupted histories (spec B.11, 5.9).

A run reaches the normalisation only when its stream breaks off, and cannot be stopped at each of the response
shapes these cases build; the recovery plan of such a history is what a resuming run continues from, so these
read the plan's history ("never" closes pending calls, the other modes leave them open). What a run keeps of the
response it was streaming (T79–T81) is in test_failure_candidates.py, through runs."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic_ai import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.messages import NativeToolCallPart, NativeToolReturnPart

from runs.harness import is_unknown_result, prepare_tool_recovery
from tests.support.tool_recovery import unknown

PROMPT = ModelRequest(parts=[UserPromptPart("go")])


def interrupted(*parts) -> ModelResponse:
    return ModelResponse(parts=list(parts), state="interrupted")


def plan_history(history: Sequence[ModelMessage], *, close_pending_tools: bool) -> list[ModelMessage]:
    return list(prepare_tool_recovery(history, "never" if close_pending_tools else "declared").history)


def test_unpaired_native_parts_are_all_dropped():
    """T82: a native call without its native return drops all native parts; text and calls stay."""
    call = ToolCallPart("lookup", {}, tool_call_id="c1")
    history = [
        PROMPT,
        ModelResponse(
            parts=[
                NativeToolCallPart("web_search", {}, tool_call_id="n0"),
                NativeToolReturnPart("web_search", "hits", tool_call_id="n0"),
            ]
        ),
        ModelRequest(parts=[UserPromptPart("more")]),
        interrupted(TextPart("Searching"), NativeToolCallPart("web_search", {}, tool_call_id="n1"), call),
    ]
    normalized = plan_history(history, close_pending_tools=False)
    assert normalized[1].parts == []
    assert normalized[3].parts == [TextPart("Searching"), call]


def test_paired_native_parts_stay():
    history = [
        PROMPT,
        interrupted(
            NativeToolCallPart("web_search", {}, tool_call_id="n1"),
            NativeToolReturnPart("web_search", "hits", tool_call_id="n1"),
            TextPart("Found"),
        ),
    ]
    assert plan_history(history, close_pending_tools=True) == history


def test_interrupted_trailing_request_gets_missing_results_appended():
    """Appendix: interrupted trailing request under close → unknown result for c2 in that same request."""
    done = ToolReturnPart("a", "ok", tool_call_id="c1")
    history = [
        PROMPT,
        ModelResponse(parts=[ToolCallPart("a", {}, tool_call_id="c1"), ToolCallPart("b", {}, tool_call_id="c2")]),
        ModelRequest(parts=[done], state="interrupted"),
    ]
    normalized = plan_history(history, close_pending_tools=True)
    assert len(normalized) == 3
    assert normalized[-1].parts[0] == done
    assert normalized[-1].parts[1].tool_call_id == "c2"
    assert is_unknown_result(normalized[-1].parts[1])


def test_pending_calls_stay_open_when_not_closing_or_provider_suspended():
    call = ToolCallPart("a", {}, tool_call_id="c1")
    history = [PROMPT, ModelResponse(parts=[call])]
    assert plan_history(history, close_pending_tools=False) == history
    suspended = [PROMPT, ModelResponse(parts=[call], state="suspended")]
    assert plan_history(suspended, close_pending_tools=True) == suspended


def test_unanswered_calls_ignores_answered_ones():
    calls = [ToolCallPart("a", {}, tool_call_id="c1"), ToolCallPart("b", {}, tool_call_id="c2")]
    history = [PROMPT, ModelResponse(parts=calls), ModelRequest(parts=[unknown("b", "c2")])]
    assert list(prepare_tool_recovery(history, "declared").replay) == [calls[0]]
