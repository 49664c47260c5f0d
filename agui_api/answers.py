"""Interrupts and their answers in AG-UI terms: one `Interrupt` per open deferred request, with the JSON schema
its answer must fit, and the `ResumeEntry` answers mapped to the approval service's `Answer`s."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ag_ui.core import Interrupt, ResumeEntry
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from runs.models import DeferredKind, DeferredRequest, Verdict
from runs.services.lifecycle import Answer, tool_parameters_schema
from runs.services.timeline import redactor_for

from .errors import Refused

__all__ = ("answers_for", "interrupt_of")

CANCELLED_MESSAGE = "Cancelled by the client."


class _Payload(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class ApprovalPayload(_Payload):
    approved: bool
    edited_args: dict[str, Any] | None = Field(default=None, alias="editedArgs")
    reason: str = ""


class QuestionPayload(_Payload):
    answer: str = Field(min_length=1)


class ExternalPayload(_Payload):
    result: Any


_PAYLOADS: dict[str, type[_Payload]] = {
    DeferredKind.APPROVAL: ApprovalPayload,
    DeferredKind.QUESTION: QuestionPayload,
    DeferredKind.EXTERNAL: ExternalPayload,
}


def response_schema(request: DeferredRequest) -> dict[str, Any]:
    """The JSON schema of `ResumeEntry.payload` for a resolved answer to `request`."""
    schema = _PAYLOADS[request.kind].model_json_schema(by_alias=True)
    if request.kind == DeferredKind.APPROVAL:
        edited = tool_parameters_schema(request.tool_name) or {"type": "object"}
        schema["properties"]["editedArgs"] = {**edited, "description": "Approve with these arguments instead."}
    return schema


def interrupt_of(request: DeferredRequest, stored: Interrupt) -> Interrupt:
    """The stored interrupt of `request` with what a client needs to answer it; a Host-managed child's is
    answered by the Host when the child ends, so it gets a message and no answer schema."""
    if request.kind == DeferredKind.CHILD:
        return stored.model_copy(
            update={"reason": request.kind, "message": "Waiting for a child execution the Host runs."}
        )
    tool_metadata = (stored.metadata or {}).get("tool_metadata") or {}
    if request.kind == DeferredKind.QUESTION and isinstance(tool_metadata.get("question"), str):
        message = tool_metadata["question"]
    elif request.reason:
        message = request.reason
    else:
        verb = "Approve" if request.kind == DeferredKind.APPROVAL else "Provide the result of"
        args = redactor_for(request.execution.policy_version).value(request.args)
        message = f"{verb} {request.tool_name}({json.dumps(args, sort_keys=True)})?"
    return stored.model_copy(
        update={
            "reason": request.kind,
            "message": message,
            "response_schema": response_schema(request),
            "expires_at": request.expires_at.isoformat() if request.expires_at else None,
        }
    )


def answers_for(requests: Sequence[DeferredRequest], entries: Sequence[ResumeEntry]) -> list[Answer]:
    """One `Answer` per entry (set checks are the approval service's); a malformed payload is a 400."""
    kinds = {request.tool_call_id: request.kind for request in requests}
    answers: list[Answer] = []
    problems: list[dict[str, Any]] = []
    for entry in entries:
        kind = kinds.get(entry.interrupt_id)
        if entry.status == "cancelled" or kind is None:
            # Unknown ids go on to the service, which refuses the whole set with its own message.
            answers.append(Answer(entry.interrupt_id, Verdict.DENIED, message=CANCELLED_MESSAGE))
            continue
        try:
            payload = _PAYLOADS[kind].model_validate(entry.payload if entry.payload is not None else {})
        except ValidationError as exc:
            problems.append({"interruptId": entry.interrupt_id, "errors": json.loads(exc.json(include_url=False))})
            continue
        answers.append(_answer(entry.interrupt_id, payload))
    if problems:
        raise Refused(400, "invalid_resume", "A resume payload does not fit its interrupt's responseSchema.", problems)
    return answers


def _answer(call_id: str, payload: _Payload) -> Answer:
    if isinstance(payload, ApprovalPayload):
        if payload.approved:
            return Answer(call_id, Verdict.APPROVED, override_args=payload.edited_args)
        return Answer(call_id, Verdict.DENIED, message=payload.reason)
    if isinstance(payload, QuestionPayload):
        return Answer(call_id, Verdict.ANSWERED, result=payload.answer)
    assert isinstance(payload, ExternalPayload)
    return Answer(call_id, Verdict.EXTERNAL_RESULT, result=payload.result)
