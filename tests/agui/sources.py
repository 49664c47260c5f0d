"""Source items for observer tests, stamped the way a Harness Run stream stamps them."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic_ai import ToolCallPart

from runs.harness import (
    DeferredToolCall,
    DeferredToolRequests,
    HarnessEvent,
    HarnessRunResult,
    HarnessRunResultEvent,
    HarnessState,
    InlineDelegationPayload,
    RunUsageSummary,
    SafeFailure,
)
from runs.harness._events import lifecycle_event, run_started_event

T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


class SourceRun:
    """One run's stream: contiguous sequence numbers from 0 and increasing times."""

    def __init__(self, run_id: str = "run-1", thread_id: str = "thread_1", *, clock_ms: int = 0) -> None:
        self.run_id = run_id
        self.thread_id = thread_id
        self.sequence = 0
        self.clock_ms = clock_ms

    def _stamp(self) -> tuple[int, datetime]:
        sequence = self.sequence
        self.sequence += 1
        return sequence, T0 + timedelta(milliseconds=self.clock_ms + 7 * sequence)

    def item(self, event: Any) -> HarnessEvent:
        sequence, occurred_at = self._stamp()
        return HarnessEvent(self.thread_id, self.run_id, sequence, occurred_at, event)

    def started(self) -> HarnessEvent:
        return self.item(run_started_event())

    def request(self, index: int) -> HarnessEvent:
        return self.item(
            lifecycle_event("model_request_started", request_id=f"model-request-{index}", request_index=index)
        )

    def delegation(self, action: str, child: SourceRun | None, *, status: str, parent_run_id: str, **extra: Any):
        payload = InlineDelegationPayload(
            invocation_id="delegation-" + "0" * 31 + "1",
            action=action,  # type: ignore[arg-type]
            child_instance_id="child-instance",
            subagent="researcher",
            status=status,
            parent_run_id=parent_run_id,
            parent_agent_instance_id="root-instance",
            child_run_id=None if child is None else child.run_id,
            **extra,
        )
        return self.item(payload.to_event())

    def result(self, status: str, **fields: Any) -> HarnessRunResultEvent[Any]:
        if status in ("completed", "suspended"):
            fields.setdefault("state", HarnessState.new(thread_id=self.thread_id))
        result = HarnessRunResult(thread_id=self.thread_id, run_id=self.run_id, status=status, **fields)  # type: ignore[arg-type]
        sequence, occurred_at = self._stamp()
        return HarnessRunResultEvent(self.thread_id, self.run_id, sequence, occurred_at, result)

    def completed(self, output: Any = "done", **usage: int) -> HarnessRunResultEvent[Any]:
        return self.result("completed", output=output, usage=RunUsageSummary(**usage))

    def failed(self, code: str = "model_failed", message: str = "The model failed.") -> HarnessRunResultEvent[Any]:
        return self.result("failed", failure=SafeFailure(code=code, message=message))

    def cancelled(self) -> HarnessRunResultEvent[Any]:
        return self.result("cancelled")

    def suspended(
        self,
        approvals: Iterable[ToolCallPart] = (),
        calls: Iterable[ToolCallPart] = (),
        metadata: dict[str, dict[str, Any]] | None = None,
    ) -> HarnessRunResultEvent[Any]:
        deferred = DeferredToolRequests(
            approvals=[DeferredToolCall(call, call, f"tool/native/{call.tool_name}") for call in approvals],
            calls=[DeferredToolCall(call, call, f"tool/native/{call.tool_name}") for call in calls],
            metadata=metadata or {},
        )
        return self.result("suspended", suspend_reason="deferred", deferred=deferred)


async def history(items: Iterable[Any]) -> AsyncIterator[Any]:
    """A finite async history, as a Host journal would replay it."""
    for item in items:
        yield item
