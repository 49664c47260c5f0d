"""The terminal AG-UI event of a run: RUN_FINISHED (success, interrupt, cancelled) or RUN_ERROR."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Required, TypedDict

import pydantic_core
from ag_ui.core import (
    Interrupt,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    TokenUsage,
)

from runs.harness import HarnessRunResultEvent, RunUsageSummary

from ._envelopes import timestamp_ms

if TYPE_CHECKING:
    from runs.harness import DeferredToolCall, PendingDeferredCalls

__all__ = ("interrupts", "terminal_event", "token_usage")


class TerminalRaw(TypedDict, total=False):
    """The `rawEvent` of a run's terminal event: the source result it stands for, in JSON."""

    thread_id: Required[str]
    run_id: Required[str]
    sequence: Required[int]
    occurred_at: Required[str]
    status: Required[str]
    failure: dict[str, Any]
    result_omitted: bool


def terminal_event(
    item: HarnessRunResultEvent[Any], tool_call_id: Callable[[str], str] = str
) -> RunFinishedEvent | RunErrorEvent:
    """The run's last event; `tool_call_id` maps a source call id to the AG-UI id the stream used for it."""
    result = item.result
    timestamp = timestamp_ms(item.occurred_at)
    raw: TerminalRaw = {
        "thread_id": item.thread_id,
        "run_id": item.run_id,
        "sequence": item.sequence,
        "occurred_at": item.occurred_at.isoformat(),
        "status": result.status,
    }
    usage = token_usage(result.usage)
    if result.status == "failed":
        assert result.failure is not None
        raw["failure"] = result.failure.model_dump(mode="json")
        return RunErrorEvent(
            message=result.failure.message,
            code=result.failure.code,
            usage=usage,
            raw_event=raw,
            timestamp=timestamp,
        )
    if result.status == "completed":
        try:
            output = json.loads(result.output_json())
        except pydantic_core.PydanticSerializationError:
            # Output that has no JSON form is still a success; say so instead of inventing a value.
            output = None
            raw["result_omitted"] = True
        outcome: Any = RunFinishedSuccessOutcome()
    elif result.status == "suspended":
        assert result.deferred is not None
        output = None
        outcome = RunFinishedInterruptOutcome(interrupts=interrupts(result.deferred, tool_call_id))
    else:
        output = None
        outcome = RunFinishedCancelledOutcome()
    return RunFinishedEvent(
        thread_id=item.thread_id,
        run_id=item.run_id,
        result=output,
        outcome=outcome,
        usage=usage,
        raw_event=raw,
        timestamp=timestamp,
    )


def interrupts(deferred: PendingDeferredCalls, tool_call_id: Callable[[str], str] = str) -> list[Interrupt]:
    """One `Interrupt` per deferred call, approvals first, identified by the target call the answer is for.

    A Host-managed child's call has the reason "child": the Host answers it when the child ends, not a client.
    """
    return [_interrupt(call, "approval", deferred, tool_call_id) for call in deferred.approvals] + [
        _interrupt(
            call,
            "child" if call.target_call.tool_call_id in deferred.children else "external",
            deferred,
            tool_call_id,
        )
        for call in deferred.calls
    ]


def _interrupt(
    call: DeferredToolCall, reason: str, deferred: PendingDeferredCalls, tool_call_id: Callable[[str], str]
) -> Interrupt:
    target = call.target_call
    return Interrupt(
        id=target.tool_call_id,
        tool_call_id=tool_call_id(call.model_call.tool_call_id),
        reason=reason,
        metadata={
            "tool_name": target.tool_name,
            "args": _args(target.args),
            "tool_metadata": deferred.metadata.get(target.tool_call_id),
        },
    )


def _args(args: str | dict[str, Any] | None) -> Any:
    # Models may stream arguments as JSON text; an approval dialog wants the object when there is one.
    if isinstance(args, str):
        try:
            return json.loads(args)
        except ValueError:
            return args
    return args


def token_usage(usage: RunUsageSummary) -> list[TokenUsage] | None:
    """AG-UI usage, omitted when no token was counted; breakdowns only when the provider reported them."""
    if not (usage.input_tokens or usage.output_tokens or usage.cache_read_tokens or usage.cache_write_tokens):
        return None
    return [
        TokenUsage(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            total_tokens=usage.input_tokens + usage.output_tokens,
            reasoning_tokens=usage.reasoning_tokens or None,
            cached_input_tokens=usage.cache_read_tokens or None,
            cache_write_input_tokens=usage.cache_write_tokens or None,
        )
    ]
