"""Decisions as timeline items: who answered a suspended run's requests, when, how, and what was edited.

An accepted decision set (or the host's own expiry) is stored as one CUSTOM `a13n.host.decision` event in the
execution's timeline, in the suspended run's lane, right after its interrupt and before the run that resumes it.
It is written in the decision's own transaction, so it travels the same replay-then-live path as every other
event and is published only once the decision is durable. No run writes the timeline while its execution
waits (none holds a lease), so the next position is free. Its origin is the Host: it is not an event of the
suspended run's AG-UI stream (it follows that run's RUN_FINISHED), so AG-UI clients leave it out.

The event shows tool arguments, so every value in it passes through the run's redaction (`Redactor` of the
frozen policy version; `store_events` masks it once more on the way in); an edited argument under a secret
key still shows *that* it changed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final, Literal

from ag_ui.core import CustomEvent
from pydantic import BaseModel, ConfigDict

from runs.models import Decision, DecisionSubmission, DeferredRequest, Execution, Run, TimelineOrigin, Verdict

from .projection import store_events
from .redaction import REDACTED, Produced, Redactor, redactor_for

__all__ = (
    "DECISION_EVENT_NAME",
    "AnsweringChild",
    "ArgumentChange",
    "DecidedCall",
    "DecisionItem",
    "argument_changes",
    "record",
)

DECISION_EVENT_NAME: Final = "a13n.host.decision"


class ArgumentChange(BaseModel):
    """One difference between the arguments the model called with and the ones the approver let through."""

    model_config = ConfigDict(frozen=True)

    path: str
    change: Literal["added", "removed", "changed"]
    before: Any = None
    after: Any = None


class DecidedCall(BaseModel):
    model_config = ConfigDict(frozen=True)

    tool_call_id: str
    tool_name: str
    kind: str
    verdict: str
    args: Any
    edits: tuple[ArgumentChange, ...] = ()
    message: str = ""
    result: Any = None


class AnsweringChild(BaseModel):
    """The Host-managed child execution whose end answered a request (its verdict says how it ended)."""

    model_config = ConfigDict(frozen=True)

    execution: int
    thread: str
    number: int


class DecisionItem(BaseModel):
    """The value of an `a13n.host.decision` event; `decided_by` is `None` for the host's own expiry and for a
    child's answer (`child`)."""

    model_config = ConfigDict(frozen=True)

    decided_by: str | None
    decided_at: datetime
    expired: bool
    suspended_run: int
    resume_run: int | None
    calls: tuple[DecidedCall, ...]
    child: AnsweringChild | None = None


def argument_changes(before: Any, after: Any, path: str = "") -> tuple[ArgumentChange, ...]:
    """The differences between two argument values, key by key through nested objects (lists count as one value)."""
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        changes: list[ArgumentChange] = []
        for key in [*before, *(key for key in after if key not in before)]:
            inner = f"{path}.{key}" if path else str(key)
            if key not in after:
                changes.append(ArgumentChange(path=inner, change="removed", before=before[key]))
            elif key not in before:
                changes.append(ArgumentChange(path=inner, change="added", after=after[key]))
            else:
                changes.extend(argument_changes(before[key], after[key], inner))
        return tuple(changes)
    if before == after:
        return ()
    return (ArgumentChange(path=path or "arguments", change="changed", before=before, after=after),)


def _redacted_change(change: ArgumentChange, redaction: Redactor) -> ArgumentChange:
    if any(redaction.is_secret(part) for part in change.path.split(".")):
        hidden = {side: REDACTED for side in ("before", "after") if getattr(change, side) is not None}
        return change.model_copy(update=hidden)
    return change.model_copy(update={"before": redaction.value(change.before), "after": redaction.value(change.after)})


def _call(decision: Decision, redaction: Redactor) -> DecidedCall:
    request: DeferredRequest = decision.request
    edits = argument_changes(request.args, decision.override_args) if decision.override_args is not None else ()
    call = DecidedCall(
        tool_call_id=request.tool_call_id,
        tool_name=request.tool_name,
        kind=request.kind,
        verdict=decision.verdict,
        args=request.args,
        edits=edits,
        message=decision.message,
        result=decision.result,
    )
    if not redaction:
        return call
    return call.model_copy(
        update={
            "args": redaction.value(call.args),
            "edits": tuple(_redacted_change(change, redaction) for change in edits),
            "message": redaction.text(call.message),
            "result": redaction.value(call.result),
        }
    )


def item_of(
    submission: DecisionSubmission, decisions: Sequence[Decision], suspended: Run, child: Execution | None = None
) -> DecisionItem:
    redaction = redactor_for(suspended.policy_version)
    user = submission.submitted_by
    return DecisionItem(
        decided_by=user.get_username() if user is not None else None,
        decided_at=submission.submitted_at,
        expired=all(decision.verdict == Verdict.EXPIRED for decision in decisions),
        suspended_run=suspended.number,
        resume_run=submission.resume_run.number if submission.resume_run is not None else None,
        calls=tuple(_call(decision, redaction) for decision in decisions),
        child=None
        if child is None
        else AnsweringChild(execution=child.pk, thread=redaction.text(str(child.thread)), number=child.number),
    )


def record(submission: DecisionSubmission, *, child: Execution | None = None) -> None:
    """Inside the decision's transaction: store the submission's decision item in the suspended run's lane
    (`child`: the Host-managed child whose end answered it)."""
    decisions = list(submission.decisions.select_related("request__run__policy_version").order_by("request_id"))
    suspended = decisions[0].request.run
    item = item_of(submission, decisions, suspended, child)
    event = CustomEvent(
        name=DECISION_EVENT_NAME,
        value=item.model_dump(mode="json"),
        timestamp=int(submission.submitted_at.timestamp() * 1000),
    )
    # Arguments, edits and results can each be up to 64 KiB: a larger item goes as fragments, like any CUSTOM event.
    produced = Produced(None, submission.submitted_at, event, f"decision-{submission.pk}")
    store_events(suspended, [produced], origin=TimelineOrigin.HOST)
