"""A suspended execution as the worker leaves it, built directly in the database for approval tests.

The suspended Run's journal ends with its `result.suspended` item (encoded with the Host codec), its state is
the thread's selected terminal checkpoint, and one DeferredRequest row stands for each pending call.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.utils import timezone
from pydantic_ai import DeferredToolRequests as NativeDeferredToolRequests
from pydantic_ai import ModelRequest, ModelResponse, Tool, ToolCallPart, UserPromptPart

from runs.harness import DeferredToolRequests, HarnessRunResult, HarnessRunResultEvent
from runs.models import (
    AgentProfile,
    CheckpointKind,
    DeferredKind,
    DeferredRequest,
    Execution,
    ExecutionStatus,
    JournalEntry,
    Run,
    RunStatus,
)
from runs.services import checkpoints
from runs.services.codec import encode_item
from runs.services.executions import create_thread, current_policy_version


def send_payment(amount: int, to: str) -> str:
    """Send money."""
    return f"sent {amount} to {to}"


def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


TOOLS = {tool.name: tool for tool in (Tool(send_payment), Tool(delete_file))}


@dataclass
class Suspended:
    execution: Execution
    run: Run
    requests: dict[str, DeferredRequest]

    @property
    def checkpoint_id(self) -> int:
        return self.execution.thread.selected_checkpoint_id


def suspended_execution(
    *,
    approvals: tuple[ToolCallPart, ...] = (
        ToolCallPart("send_payment", {"amount": 5000, "to": "acme"}, tool_call_id="call-pay"),
        ToolCallPart("delete_file", {"path": "/srv/data"}, tool_call_id="call-del"),
    ),
    calls: tuple[ToolCallPart, ...] = (),
    questions: tuple[str, ...] = (),
    expires_in: timedelta | None = None,
    title: str = "payments",
) -> Suspended:
    profile, _ = AgentProfile.objects.get_or_create(name="approvals-test", defaults={"model": "demo"})
    thread = create_thread(profile, title=title)
    version = current_policy_version()
    number = thread.executions.count() + 1
    execution = Execution.objects.create(
        thread=thread, number=number, input="pay acme", status=ExecutionStatus.WAITING, policy_version=version
    )
    run_id = f"run-{thread.pk}-{number}"
    run = Run.objects.create(
        execution=execution, number=1, run_id=run_id, status=RunStatus.SUSPENDED, policy_version=version
    )
    pending = [*approvals, *calls]
    state = checkpoints.load(thread.selected_checkpoint).with_changes(
        message_history=[ModelRequest(parts=[UserPromptPart("pay acme")]), ModelResponse(parts=list(pending))]
    )
    deferred = DeferredToolRequests.export(
        NativeDeferredToolRequests(calls=list(calls), approvals=list(approvals)),
        definitions={name: tool.tool_def for name, tool in TOOLS.items()},
    )
    result = HarnessRunResult(
        thread_id=thread.thread_id,
        run_id=run_id,
        status="suspended",
        state=state,
        suspend_reason="deferred",
        deferred=deferred,
    )
    now = timezone.now()
    encoded = encode_item(HarnessRunResultEvent(thread.thread_id, run_id, 0, now, result))
    JournalEntry.objects.create(
        run=run,
        index=0,
        source_run_id=encoded.source_run_id,
        source_sequence=encoded.source_sequence,
        kind=encoded.kind,
        occurred_at=encoded.occurred_at,
        payload=encoded.payload,
        codec_version=encoded.codec_version,
    )
    terminal = checkpoints.create(thread, state, kind=CheckpointKind.TERMINAL, run=run, journal_index=0)
    thread.selected_checkpoint = terminal
    thread.save(update_fields=["selected_checkpoint"])
    expires_at = now + expires_in if expires_in is not None else None

    def request(call: ToolCallPart, kind: DeferredKind) -> DeferredRequest:
        return DeferredRequest.objects.create(
            execution=execution,
            run=run,
            checkpoint=terminal,
            tool_call_id=call.tool_call_id,
            tool_name=call.tool_name,
            kind=kind,
            args=call.args_as_dict(),
            reason=f"policy says {call.tool_name} needs a human",
            expires_at=expires_at,
        )

    rows = [request(call, DeferredKind.APPROVAL) for call in approvals]
    rows += [
        request(call, DeferredKind.QUESTION if call.tool_call_id in questions else DeferredKind.EXTERNAL)
        for call in calls
    ]
    execution.refresh_from_db()
    return Suspended(execution=execution, run=run, requests={row.tool_call_id: row for row in rows})
