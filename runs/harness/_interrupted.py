"""Turning an interrupted history into a safe continuation candidate.

When a run fails or is cancelled while a model response streams, pydantic-ai leaves the partial response in
the history (`state="interrupted"`). Only what was really shown to observers may survive: complete visible
text, finished thinking and finalised tool calls. Finalised calls that never got a result get an "unknown
result", because the operation may or may not have happened.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from pydantic_ai import (
    ModelMessage,
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
)
from pydantic_ai.messages import (
    ModelResponsePart,
    NativeToolCallPart,
    NativeToolReturnPart,
    RetryPromptPart,
)

__all__ = (
    "INTERRUPTED_TOOL_RESULT",
    "InterruptedResponseTracker",
    "answered_call_ids",
    "is_unknown_result",
    "latest_response_index",
    "normalize_interrupted_history",
    "unanswered_calls",
    "unknown_result",
)

INTERRUPTED_TOOL_RESULT = (
    "No result was recorded because execution was interrupted. The operation may have partly or fully "
    "completed; check the current state before retrying it."
)


def unknown_result(call: ToolCallPart) -> ToolReturnPart:
    """The failed tool return that stands for "we do not know whether this call ran"."""
    return ToolReturnPart(
        tool_name=call.tool_name,
        content=INTERRUPTED_TOOL_RESULT,
        tool_call_id=call.tool_call_id,
        outcome="failed",
    )


def is_unknown_result(part: object) -> bool:
    """Whether `part` is the unknown result a call gets when whether it ran was lost (`INTERRUPTED_TOOL_RESULT`)."""
    return isinstance(part, ToolReturnPart) and part.outcome == "failed" and part.content == INTERRUPTED_TOOL_RESULT


def answered_call_ids(messages: Sequence[ModelMessage]) -> set[str]:
    """Ids of ordinary tool calls that have a return or retry prompt anywhere in the history."""
    return {
        part.tool_call_id
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart | RetryPromptPart)
    }


def latest_response_index(messages: Sequence[ModelMessage]) -> int | None:
    """Index of the latest `ModelResponse`, or `None` when the history has none."""
    return next(
        (index for index in range(len(messages) - 1, -1, -1) if isinstance(messages[index], ModelResponse)), None
    )


def unanswered_calls(messages: Sequence[ModelMessage]) -> list[ToolCallPart]:
    """Ordinary tool calls of the latest response that have no result yet, in call order."""
    index = latest_response_index(messages)
    if index is None:
        return []
    response = messages[index]
    assert isinstance(response, ModelResponse)
    answered = answered_call_ids(messages[index + 1 :])
    return [call for call in response.tool_calls if call.tool_call_id not in answered]


@dataclass
class _PartProgress:
    start: ModelResponsePart
    streamed_text: str = ""
    end: ModelResponsePart | None = None


@dataclass
class InterruptedResponseTracker:
    """Remembers which parts of each streamed response were started, streamed and finished.

    Responses are keyed by their boundary: the length of the run's message list while the response streams,
    which is the index the response gets once pydantic-ai appends it.
    """

    _responses: dict[int, dict[int, _PartProgress]] = field(default_factory=dict)

    def observe(self, event: object, *, boundary: int) -> None:
        if isinstance(event, PartStartEvent):
            started = _PartProgress(start=event.part)
            if isinstance(event.part, TextPart):
                started.streamed_text = event.part.content
            self._responses.setdefault(boundary, {})[event.index] = started
        elif isinstance(event, PartDeltaEvent):
            progress = self._responses.get(boundary, {}).get(event.index)
            if progress is not None and isinstance(event.delta, TextPartDelta):
                progress.streamed_text += event.delta.content_delta
        elif isinstance(event, PartEndEvent):
            progress = self._responses.get(boundary, {}).get(event.index)
            if progress is not None:
                progress.end = event.part

    def sanitize(self, messages: Sequence[ModelMessage]) -> list[ModelMessage]:
        """Reduce an interrupted tail response to what was observably complete (or drop it)."""
        history = list(messages)
        if not history:
            return history
        tail = history[-1]
        if not isinstance(tail, ModelResponse) or tail.state != "interrupted":
            return history
        observed = self._responses.get(len(history) - 1)
        if not observed or not tail.parts:
            return history[:-1]
        kept = [part for _, progress in sorted(observed.items()) if (part := _kept_part(progress)) is not None]
        if not kept:
            return history[:-1]
        history[-1] = replace(tail, parts=kept)
        return history


def _kept_part(progress: _PartProgress) -> ModelResponsePart | None:
    if isinstance(progress.start, TextPart):
        text = progress.end.content if isinstance(progress.end, TextPart) else progress.streamed_text
        return replace(progress.start, content=text) if text else None
    if isinstance(progress.start, ThinkingPart):
        end = progress.end
        if isinstance(end, ThinkingPart) and (end.content or end.signature):
            return end
        return None
    if isinstance(progress.start, NativeToolReturnPart):
        # A provider's built-in tool return arrives whole: its start is already final.
        return progress.end or progress.start
    return progress.end


def _native_parts_pair_up(messages: Sequence[ModelMessage]) -> bool:
    calls: dict[str, NativeToolCallPart] = {}
    returned: set[str] = set()
    for message in messages:
        if not isinstance(message, ModelResponse):
            continue
        for part in message.parts:
            if isinstance(part, NativeToolCallPart):
                if part.tool_call_id in calls:
                    return False
                calls[part.tool_call_id] = part
            elif isinstance(part, NativeToolReturnPart):
                call = calls.get(part.tool_call_id)
                if call is None or part.tool_call_id in returned or call.tool_name != part.tool_name:
                    return False
                returned.add(part.tool_call_id)
    return returned == set(calls)


def _without_native_parts(messages: Sequence[ModelMessage]) -> list[ModelMessage]:
    history: list[ModelMessage] = []
    for index, message in enumerate(messages):
        if isinstance(message, ModelResponse):
            parts = [p for p in message.parts if not isinstance(p, NativeToolCallPart | NativeToolReturnPart)]
            if not parts and index == len(messages) - 1:
                continue
            message = replace(message, parts=parts)
        history.append(message)
    return history


def normalize_interrupted_history(messages: Sequence[ModelMessage], *, close_pending_tools: bool) -> list[ModelMessage]:
    """Make an (already sanitized) interrupted history safe to continue.

    Native (provider built-in) tool parts survive only as strict call/return pairs. With
    `close_pending_tools`, finalised ordinary calls without a result get an unknown result: appended to an
    interrupted trailing request, or as a new request. Leave them open while accepted deferred input still
    has to answer them.
    """
    history = list(messages)
    if not _native_parts_pair_up(history):
        history = _without_native_parts(history)
    if not close_pending_tools or not history:
        return history
    pending = unanswered_calls(history)
    if not pending:
        return history
    tail = history[-1]
    if isinstance(tail, ModelResponse):
        if tail.state == "suspended":
            # A provider-suspended response continues natively; its calls are not ours to close.
            return history
        history.append(ModelRequest(parts=[unknown_result(call) for call in pending]))
    elif isinstance(tail, ModelRequest) and tail.state == "interrupted":
        previous = history[-2] if len(history) > 1 else None
        if isinstance(previous, ModelResponse) and previous.state == "suspended":
            return history
        history[-1] = replace(tail, parts=[*tail.parts, *(unknown_result(call) for call in pending)])
    return history
