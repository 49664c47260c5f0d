"""Safe failure candidates from interrupted histories (spec B.11, 5.9)."""

from __future__ import annotations

from pydantic_ai import (
    ModelRequest,
    ModelResponse,
    PartDeltaEvent,
    PartEndEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.messages import NativeToolCallPart, NativeToolReturnPart

from runs.harness import INTERRUPTED_TOOL_RESULT, is_unknown_result

# The interrupted-history component on its own: a run reaches it only when its stream breaks off, and cannot be
# stopped at each of the response shapes these cases build.
from runs.harness._interrupted import (
    InterruptedResponseTracker,
    normalize_interrupted_history,
    unanswered_calls,
    unknown_result,
)

PROMPT = ModelRequest(parts=[UserPromptPart("go")])


def interrupted(*parts) -> ModelResponse:
    return ModelResponse(parts=list(parts), state="interrupted")


def test_tracker_keeps_finished_thinking_and_streamed_text_only():
    """T79: finished thinking (with signature) and text "Hel"+"lo" survive; unfinished parts do not."""
    tracker = InterruptedResponseTracker()
    thinking = ThinkingPart("plan", signature="sig-1")
    for event in (
        PartStartEvent(index=0, part=ThinkingPart("pl")),
        PartEndEvent(index=0, part=thinking),
        PartStartEvent(index=1, part=TextPart("Hel")),
        PartDeltaEvent(index=1, delta=TextPartDelta("lo")),
        PartStartEvent(index=2, part=ThinkingPart("half a thou")),
        PartStartEvent(index=3, part=ToolCallPart("lookup", '{"q":', tool_call_id="c1")),
    ):
        tracker.observe(event, boundary=1)
    history = [
        PROMPT,
        interrupted(thinking, TextPart("Hello"), ThinkingPart("half a thou"), ToolCallPart("lookup", '{"q":', "c1")),
    ]

    sanitized = tracker.sanitize(history)

    tail = sanitized[-1]
    assert isinstance(tail, ModelResponse)
    assert tail.state == "interrupted"
    assert tail.parts == [thinking, TextPart("Hello")]
    assert normalize_interrupted_history(sanitized, close_pending_tools=True) == sanitized


def test_tracker_drops_a_response_it_never_saw():
    """T80: an interrupted response without observed part events is dropped."""
    tracker = InterruptedResponseTracker()
    tracker.observe(PartStartEvent(index=0, part=TextPart("old")), boundary=0)
    history = [PROMPT, interrupted(TextPart("never streamed"))]
    assert tracker.sanitize(history) == [PROMPT]
    assert tracker.sanitize([PROMPT, interrupted()]) == [PROMPT]


def test_finalised_call_without_result_gets_an_unknown_result():
    """T81."""
    tracker = InterruptedResponseTracker()
    call = ToolCallPart("lookup", {"q": "x"}, tool_call_id="c1")
    tracker.observe(PartStartEvent(index=0, part=ToolCallPart("lookup", "", tool_call_id="c1")), boundary=1)
    tracker.observe(PartEndEvent(index=0, part=call), boundary=1)
    history = normalize_interrupted_history(tracker.sanitize([PROMPT, interrupted(call)]), close_pending_tools=True)

    assert history[1].parts == [call]
    closing = history[-1]
    assert isinstance(closing, ModelRequest)
    [result] = closing.parts
    assert isinstance(result, ToolReturnPart)
    assert (result.tool_call_id, result.outcome, result.content) == ("c1", "failed", INTERRUPTED_TOOL_RESULT)
    assert is_unknown_result(result)


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
    normalized = normalize_interrupted_history(history, close_pending_tools=False)
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
    assert normalize_interrupted_history(history, close_pending_tools=True) == history


def test_interrupted_trailing_request_gets_missing_results_appended():
    """Appendix: interrupted trailing request under close → unknown result for c2 in that same request."""
    done = ToolReturnPart("a", "ok", tool_call_id="c1")
    history = [
        PROMPT,
        ModelResponse(parts=[ToolCallPart("a", {}, tool_call_id="c1"), ToolCallPart("b", {}, tool_call_id="c2")]),
        ModelRequest(parts=[done], state="interrupted"),
    ]
    normalized = normalize_interrupted_history(history, close_pending_tools=True)
    assert len(normalized) == 3
    assert normalized[-1].parts[0] == done
    assert normalized[-1].parts[1].tool_call_id == "c2"
    assert is_unknown_result(normalized[-1].parts[1])


def test_pending_calls_stay_open_when_not_closing_or_provider_suspended():
    call = ToolCallPart("a", {}, tool_call_id="c1")
    history = [PROMPT, ModelResponse(parts=[call])]
    assert normalize_interrupted_history(history, close_pending_tools=False) == history
    suspended = [PROMPT, ModelResponse(parts=[call], state="suspended")]
    assert normalize_interrupted_history(suspended, close_pending_tools=True) == suspended


def test_unanswered_calls_ignores_answered_ones():
    calls = [ToolCallPart("a", {}, tool_call_id="c1"), ToolCallPart("b", {}, tool_call_id="c2")]
    history = [PROMPT, ModelResponse(parts=calls), ModelRequest(parts=[unknown_result(calls[1])])]
    assert unanswered_calls(history) == [calls[0]]
