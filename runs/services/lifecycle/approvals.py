"""Answering a suspended run's deferred requests, and expiring requests nobody answered.

A suspended run's requests form one set, answered by two hands: operators answer the approvals, external
calls and questions (the operator part, accepted only whole, for the checkpoint it was shown for, once per
submission key; anything else is refused before a single row changes), and the Host answers each
Host-managed child's request when that child execution ends (`answer_child_request`). Each answer is
recorded (who, when, each verdict, the exact arguments approved and their keyed digest); the answer that completes
the set hands the execution service the `DeferredToolResume` built here from every recorded answer, which
enqueues the resuming Run. The resuming Run still runs under the current policy and the engine's own
checks; an approval recorded here is never permission to replay a call.

Who answers (`answer_role`): a set holding an approval needs the approver role in the thread's team; a set of
questions and external results only the operator role, who may start the work anyway.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, TypeGuard

from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.db.models import Exists, F, OuterRef, QuerySet
from django.utils import timezone
from django.utils.crypto import salted_hmac
from pydantic import ValidationError
from pydantic_ai import ToolApproved, ToolDenied, ToolFailed

from runs.harness import DeferredToolResume, HarnessRunResultEvent, PendingDeferredCalls
from runs.models import (
    Decision,
    DecisionSubmission,
    DeferredKind,
    DeferredRequest,
    DeferredStatus,
    Execution,
    ExecutionStatus,
    JournalEntry,
    Run,
    TeamRole,
    Verdict,
)
from runs.services.lifecycle.executions import resume_execution
from runs.services.store import access, toolbox
from runs.services.store.host_events import HostEvent, announce
from runs.services.store.journal import decoded
from runs.services.timeline import decision_items
from runs.services.timeline.publishing import publish_approvals_changed
from runs.services.timeline.redaction import redactor_for, restore_redacted

log = logging.getLogger(__name__)

MAX_VALUE_BYTES: Final = 64 * 1024
"""Largest JSON of one edited argument set, external result or answer (the engine's metadata bound)."""
MAX_MESSAGE_CHARS: Final = 4000
EXPIRY_MESSAGE: Final = "No answer arrived before the approval timeout; the host denied this call."
CANCEL_MESSAGE: Final = "The execution was cancelled while this call waited for an answer."
ANSWER_REFUSED: Final = (
    "Your role in the thread's team does not allow answering these requests: approvals need the approver role, "
    "questions and external results the operator role."
)
ARGS_DIGEST_SALT: Final = "runs.decision.args_digest.v1"

ALLOWED_VERDICTS: Final[Mapping[str, frozenset[str]]] = {
    DeferredKind.APPROVAL: frozenset({Verdict.APPROVED, Verdict.DENIED}),
    DeferredKind.EXTERNAL: frozenset({Verdict.EXTERNAL_RESULT, Verdict.DENIED}),
    DeferredKind.QUESTION: frozenset({Verdict.ANSWERED, Verdict.DENIED}),
}
# Verdicts that refuse the call: an approval is denied, any other call fails.
_REFUSALS: Final = (Verdict.DENIED, Verdict.EXPIRED, Verdict.FAILED, Verdict.CANCELLED)


class SubmissionRejected(Exception):
    """A decision set that was refused as a whole; `message` is meant for the operator."""

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


@dataclass(frozen=True)
class Answer:
    """One operator answer: `override_args` for an approval with edited arguments, `result` for an external
    result (any JSON) or a question's answer (text), `message` for a denial."""

    tool_call_id: str
    verdict: str
    override_args: dict[str, Any] | None = None
    result: Any = None
    message: str = ""


def args_digest(args: Any) -> str:
    """HMAC-SHA256, keyed from the secret key for this purpose alone, of the canonical JSON (sorted keys, no
    spaces) of the arguments a call was approved with.

    Everyone who reads the audit sees it beside the masked arguments; an unkeyed hash would let them confirm
    guesses of a masked value offline.
    """
    return salted_hmac(ARGS_DIGEST_SALT, canonical_json(args), algorithm="sha256").hexdigest()


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def check_tool_args(tool_name: str, args: Any) -> tuple[str, ...]:
    """Problems of edited arguments under the tool's own argument validator, as dispatch will see them.

    Tools outside the host registry (external or client tools) are only checked for being a JSON object;
    the engine validates them again at dispatch.
    """
    if not isinstance(args, dict):
        return ("arguments must be a JSON object",)
    tool = toolbox.get_tool(tool_name)
    if tool is None:
        return ()
    try:
        tool.function_schema.validator.validate_python(args)
    except ValidationError as exc:
        return tuple(f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in exc.errors())
    return ()


def tool_parameters_schema(tool_name: str) -> dict[str, Any] | None:
    """The JSON schema the browser checks edited arguments against before submitting."""
    tool = toolbox.get_tool(tool_name)
    return tool.tool_def.parameters_json_schema if tool is not None else None


def answer_role(requests: Iterable[DeferredRequest]) -> TeamRole:
    """The role that answers a set of `requests`: an approval is an approver's decision; questions and external
    results are an operator's, like the prompts that started the work."""
    if any(request.kind == DeferredKind.APPROVAL for request in requests):
        return access.ACTION_ROLES[access.Action.DECIDE]
    return access.ACTION_ROLES[access.Action.ANSWER]


def can_decide(user: User | AnonymousUser, execution: Execution) -> TypeGuard[User]:
    """Whether `user` may answer the open set of `execution` (an empty one: as an operator) in its thread's team."""
    role = access.role_in(user, access.team_of(execution))
    return role is not None and role >= answer_role(pending_requests(execution))


def answerable_requests(user: User | AnonymousUser) -> QuerySet[DeferredRequest]:
    """The open requests whose set `user` may answer: what the inbox, the nav badge and the approvals socket count."""
    requests = open_requests()
    approval_in_set = DeferredRequest.objects.filter(
        execution_id=OuterRef("execution_id"),
        checkpoint_id=OuterRef("checkpoint_id"),
        status=DeferredStatus.PENDING,
        kind=DeferredKind.APPROVAL,
    )
    decided = access.scoped(requests, user, access.ACTION_ROLES[access.Action.DECIDE])
    answered = access.scoped(requests.exclude(Exists(approval_in_set)), user, access.ACTION_ROLES[access.Action.ANSWER])
    return decided | answered


def awaiting_approval(user: User | AnonymousUser) -> QuerySet[Execution]:
    """The executions with an approval in the user's inbox: what a bulk decision "on all in the inbox" covers."""
    requests = answerable_requests(user).filter(kind=DeferredKind.APPROVAL)
    return Execution.objects.filter(pk__in=requests.values("execution_id"))


def pending_requests(execution: Execution) -> list[DeferredRequest]:
    """The open set an operator answers: pending requests of the checkpoint the thread has selected now, but
    for Host-managed children's (the Host answers those)."""
    return [request for request in pending_set(execution) if request.kind != DeferredKind.CHILD]


def pending_set(execution: Execution) -> list[DeferredRequest]:
    """Every pending request of the checkpoint the thread has selected now, Host-managed children's included."""
    checkpoint_id = execution.thread.selected_checkpoint_id
    if checkpoint_id is None:
        return []
    return list(
        DeferredRequest.objects.filter(
            execution=execution, checkpoint_id=checkpoint_id, status=DeferredStatus.PENDING
        ).order_by("id")
    )


def open_requests() -> QuerySet[DeferredRequest]:
    """Every request that can be answered now, oldest first: pending, of a waiting execution, in the set of the
    checkpoint its thread has selected (the inbox, the nav badge and their live updates all count these)."""
    return (
        DeferredRequest.objects.filter(
            status=DeferredStatus.PENDING,
            execution__status=ExecutionStatus.WAITING,
            checkpoint_id=F("execution__thread__selected_checkpoint_id"),
        )
        .exclude(kind=DeferredKind.CHILD)
        .order_by("created_at", "id")
    )


def submit_decisions(
    execution: Execution,
    *,
    checkpoint_id: int | None,
    key: str,
    answers: Sequence[Answer],
    user: User | AnonymousUser,
) -> DecisionSubmission:
    """Record the operator part of a set, complete, and start the resuming Run once no Host-managed child's
    request is left open; `SubmissionRejected` changes nothing."""
    if not can_decide(user, execution):
        raise PermissionDenied(ANSWER_REFUSED)
    if not key or len(key) > 100:
        raise SubmissionRejected("The form has no valid submission key; reload the page.", code="key_missing")
    try:
        with transaction.atomic():
            return _accept(execution, checkpoint_id=checkpoint_id, key=key, answers=answers, user=user)
    except IntegrityError as exc:
        # Two posts of the same key racing: the database's unique key decides, the loser changes nothing.
        raise _duplicate() from exc


def expire_overdue_requests(now: datetime | None = None) -> int:
    """Answer every set whose requests passed `expires_at` with denials only; returns the sets expired."""
    now = now or timezone.now()
    return sum(expire_request_set(execution_id, checkpoint_id) for execution_id, checkpoint_id in overdue_sets(now))


def overdue_sets(now: datetime) -> list[tuple[int, int]]:
    """(execution pk, checkpoint pk) of every request set with a pending request past its expiry."""
    overdue = (
        DeferredRequest.objects.filter(status=DeferredStatus.PENDING, expires_at__lte=now)
        .values_list("execution_id", "checkpoint_id")
        .distinct()
    )
    return list(overdue)


def expire_request_set(execution_id: int, checkpoint_id: int) -> bool:
    """Answer the operator part of one overdue set with denials only; False if it was superseded or cannot be
    answered.

    Called by the recovery sweep. The operator part of a checkpoint's set expires together (operators answer
    it whole), is recorded as a submission by nobody with verdict "expired", and resumes the run (once its
    Host-managed children, which never expire, have answered too) so the model learns the calls were refused.
    """
    with transaction.atomic():
        execution = Execution.objects.select_for_update().select_related("thread").get(pk=execution_id)
        requests = pending_requests(execution)
        if execution.status != ExecutionStatus.WAITING or execution.thread.selected_checkpoint_id != checkpoint_id:
            # Superseded (a fork or a newer run moved the thread): nothing left to answer here.
            DeferredRequest.objects.filter(
                execution_id=execution_id, checkpoint_id=checkpoint_id, status=DeferredStatus.PENDING
            ).update(status=DeferredStatus.EXPIRED)
            publish_approvals_changed()
            return False
        if not requests:
            return False
        answers = [Answer(r.tool_call_id, Verdict.EXPIRED, message=EXPIRY_MESSAGE) for r in requests]
        try:
            # A savepoint: a set refused after its answers were stored leaves none of them behind.
            with transaction.atomic():
                _record(
                    execution,
                    requests,
                    answers,
                    key=f"expiry-{execution_id}-{checkpoint_id}",
                    user=None,
                    request_status=DeferredStatus.EXPIRED,
                )
        except SubmissionRejected as exc:
            # One broken set must not stop the sweep from expiring the others; it is retried next pass.
            log.warning("cannot expire the requests of execution %s: %s", execution_id, exc.message)
            return False
    return True


def _accept(
    execution: Execution,
    *,
    checkpoint_id: int | None,
    key: str,
    answers: Sequence[Answer],
    user: User,
) -> DecisionSubmission:
    execution = Execution.objects.select_for_update().select_related("thread").get(pk=execution.pk)
    if DecisionSubmission.objects.filter(key=key).exists():
        raise _duplicate()
    requests = pending_requests(execution)
    if (
        execution.status != ExecutionStatus.WAITING
        or not requests
        or checkpoint_id is None
        or execution.thread.selected_checkpoint_id != checkpoint_id
    ):
        raise SubmissionRejected(
            "These requests were already answered or superseded: the thread has moved on since this form was "
            "shown. Nothing was changed; reload the page to see the current state.",
            code="stale",
        )
    if any(request.expires_at is not None and request.expires_at <= timezone.now() for request in requests):
        raise SubmissionRejected(
            "The approval timeout of these requests has passed: the host denies them. Nothing was changed.",
            code="expired",
        )
    _check_complete_set(requests, answers)
    answers = _unmasked(execution, requests, answers)
    for request, answer in _paired(requests, answers):
        _check_answer(request, answer)
    return _record(execution, requests, answers, key=key, user=user, request_status=DeferredStatus.DECIDED)


def answer_child_request(
    request: DeferredRequest, answer: Answer, *, child: Execution | None = None
) -> DecisionSubmission | None:
    """Inside the transaction that ended a Host-managed child (`child`; or, without one, the suspension that could
    not start it): its outcome as the answer to the parent's request, resuming the parent if that completed its
    set. A child's answer is a decision item in the parent's timeline. `None` when the request no longer waits
    (the parent was cancelled or moved on), so a repeated end answers nothing twice."""
    execution = Execution.objects.select_for_update().select_related("thread").get(pk=request.execution_id)
    request = DeferredRequest.objects.get(pk=request.pk)
    if (
        request.status != DeferredStatus.PENDING
        or execution.status != ExecutionStatus.WAITING
        or execution.thread.selected_checkpoint_id != request.checkpoint_id
    ):
        return None
    return _record(
        execution,
        [request],
        [answer],
        key=f"child-{request.pk}",
        user=None,
        request_status=DeferredStatus.DECIDED,
        # A child that could not start is answered inside the suspending run's own transaction, before its lane
        # is closed; the resume run shows that refusal.
        timeline=child is not None,
        child=child,
    )


def _duplicate() -> SubmissionRejected:
    return SubmissionRejected(
        "This decision set was already submitted (same form). Nothing was changed a second time.", code="duplicate"
    )


def _check_complete_set(requests: Sequence[DeferredRequest], answers: Sequence[Answer]) -> None:
    pending = {request.tool_call_id for request in requests}
    given = Counter(answer.tool_call_id for answer in answers)
    if repeated := sorted(call_id for call_id, count in given.items() if count > 1):
        raise SubmissionRejected(
            f"Each request must be answered once; repeated: {', '.join(repeated)}.", code="repeated"
        )
    if unknown := sorted(set(given) - pending):
        raise SubmissionRejected(
            f"Unknown tool call ids (not pending in this set): {', '.join(unknown)}.", code="unknown_call"
        )
    if missing := sorted(pending - set(given)):
        raise SubmissionRejected(
            f"The whole set must be answered at once; missing answers for: {', '.join(missing)}.", code="incomplete"
        )


def _paired(requests: Sequence[DeferredRequest], answers: Sequence[Answer]) -> list[tuple[DeferredRequest, Answer]]:
    by_id = {answer.tool_call_id: answer for answer in answers}
    return [(request, by_id[request.tool_call_id]) for request in requests]


def _unmasked(execution: Execution, requests: Sequence[DeferredRequest], answers: Sequence[Answer]) -> list[Answer]:
    """Edited arguments as meant: what the approver left as shown (masked) keeps its real value."""
    redactor = redactor_for(execution.policy_version)
    return [
        dataclasses.replace(answer, override_args=restore_redacted(answer.override_args, request.args, redactor))
        if answer.override_args is not None
        else answer
        for request, answer in _paired(requests, answers)
    ]


def _check_answer(request: DeferredRequest, answer: Answer) -> None:
    label = f"{request.tool_name} ({request.tool_call_id})"
    if answer.verdict not in ALLOWED_VERDICTS.get(request.kind, ()):
        allowed = ", ".join(sorted(ALLOWED_VERDICTS.get(request.kind, ())))
        raise SubmissionRejected(
            f"{label} is a request of kind '{request.kind}'; it cannot be answered with '{answer.verdict}' "
            f"(allowed: {allowed}).",
            code="wrong_category",
        )
    if len(answer.message) > MAX_MESSAGE_CHARS:
        raise SubmissionRejected(
            f"{label}: the message is longer than {MAX_MESSAGE_CHARS} characters.", code="too_large"
        )
    if answer.verdict == Verdict.APPROVED and answer.override_args is not None:
        _check_size(label, "edited arguments", answer.override_args)
        problems = check_tool_args(request.tool_name, answer.override_args)
        if problems:
            raise SubmissionRejected(
                f"{label}: the edited arguments do not fit the tool's schema: {'; '.join(problems)}.",
                code="invalid_args",
            )
    if answer.verdict == Verdict.EXTERNAL_RESULT:
        _check_size(label, "result", answer.result)
    if answer.verdict == Verdict.ANSWERED:
        if not isinstance(answer.result, str) or not answer.result.strip():
            raise SubmissionRejected(f"{label}: the answer to the question is empty.", code="invalid_result")
        _check_size(label, "answer", answer.result)


def _check_size(label: str, what: str, value: Any) -> None:
    try:
        size = len(canonical_json(value).encode())
    except (TypeError, ValueError) as exc:
        raise SubmissionRejected(f"{label}: the {what} is not finite JSON.", code="invalid_result") from exc
    if size > MAX_VALUE_BYTES:
        raise SubmissionRejected(
            f"{label}: the {what} is {size} bytes of JSON; at most {MAX_VALUE_BYTES} are accepted.", code="too_large"
        )


def suspended_requests(run_id: int) -> PendingDeferredCalls:
    """The exact requests the suspended run returned, from its terminal journal item."""
    entry = JournalEntry.objects.filter(run_id=run_id, kind="result.suspended").order_by("-index").first()
    event = decoded(entry) if entry is not None else None
    deferred = event.result.deferred if isinstance(event, HarnessRunResultEvent) else None
    if deferred is None:
        raise SubmissionRejected(
            "The suspended run's requests are not in its journal; this set cannot be answered.", code="unavailable"
        )
    return deferred


def _native_results(
    requests: Sequence[DeferredRequest], answers: Sequence[Answer]
) -> tuple[dict[str, Any], dict[str, Any]]:
    approvals: dict[str, Any] = {}
    calls: dict[str, Any] = {}
    for request, answer in _paired(requests, answers):
        refused = answer.verdict in _REFUSALS
        if request.kind == DeferredKind.APPROVAL:
            approvals[request.tool_call_id] = (
                ToolDenied(answer.message or ToolDenied().message)
                if refused
                else ToolApproved(override_args=answer.override_args)
            )
        else:
            # pydantic-ai 2.68 turns a denial under `calls` into a successful return; a failed result is how an
            # external call is refused.
            calls[request.tool_call_id] = (
                ToolFailed(answer.message or "The operator refused this call.") if refused else answer.result
            )
    return approvals, calls


def _record(
    execution: Execution,
    requests: Sequence[DeferredRequest],
    answers: Sequence[Answer],
    *,
    key: str,
    user: User | None,
    request_status: str,
    timeline: bool = True,
    child: Execution | None = None,
) -> DecisionSubmission:
    """Store answers to part of a set (`timeline`: as a decision item too, naming the answering `child`), and
    resume the execution if that completed the set."""
    if len({request.run_id for request in requests}) != 1:
        raise SubmissionRejected("The requests answered together must be of one suspended run.", code="stale")
    deferred = suspended_requests(requests[0].run_id)
    known = {entry.target_call.tool_call_id for entry in deferred.entries()}
    if not {request.tool_call_id for request in requests} <= known:
        raise SubmissionRejected(
            "The pending requests no longer match what the run suspended with; reload the page.", code="stale"
        )
    submission = _store(execution, requests, answers, key=key, user=user, request_status=request_status)
    submission.resume_run = _resume_if_answered(execution, requests[0], deferred)
    if submission.resume_run is not None:
        submission.save(update_fields=["resume_run"])
    if timeline:
        decision_items.record(submission, child=child)
    return submission


def _resume_if_answered(execution: Execution, request: DeferredRequest, deferred: PendingDeferredCalls) -> Run | None:
    """The resuming Run once every request of `request`'s set has its answer, built from all recorded answers."""
    whole = list(
        DeferredRequest.objects.filter(run_id=request.run_id, checkpoint_id=request.checkpoint_id)
        .select_related("decision")
        .order_by("id")
    )
    if any(item.status == DeferredStatus.PENDING for item in whole):
        return None
    if {item.tool_call_id for item in whole} != {entry.target_call.tool_call_id for entry in deferred.entries()}:
        raise SubmissionRejected(
            "The pending requests no longer match what the run suspended with; reload the page.", code="stale"
        )
    approvals, calls = _native_results(whole, [_answer_of(item) for item in whole])
    try:
        results = deferred.build_results(approvals=approvals, calls=calls)
    except ValueError as exc:
        raise SubmissionRejected(
            f"The answers do not match the request categories: {exc}", code="wrong_category"
        ) from exc
    return resume_execution(execution, DeferredToolResume(deferred, results))


def _answer_of(request: DeferredRequest) -> Answer:
    """A recorded answer as given (arguments approved as edited, results, messages)."""
    decision = request.decision
    return Answer(
        request.tool_call_id,
        decision.verdict,
        override_args=decision.override_args,
        result=decision.result,
        message=decision.message,
    )


def record_cancellation(
    execution: Execution, requests: Sequence[DeferredRequest], *, user: User | None
) -> DecisionSubmission:
    """Inside the cancelling transaction: the open set answered `cancelled` by `user` (None: the host).

    Nothing resumes: the execution ends. The requests close as expired, and the decision item shows who
    cancelled in the timeline, as the decisions do in the audit.
    """
    answers = [Answer(request.tool_call_id, Verdict.CANCELLED, message=CANCEL_MESSAGE) for request in requests]
    key = f"cancel-{execution.pk}-{requests[0].checkpoint_id}"
    submission = _store(execution, requests, answers, key=key, user=user, request_status=DeferredStatus.EXPIRED)
    decision_items.record(submission)
    return submission


def _store(
    execution: Execution,
    requests: Sequence[DeferredRequest],
    answers: Sequence[Answer],
    *,
    key: str,
    user: User | None,
    request_status: str,
) -> DecisionSubmission:
    decided_by = user if user is not None and user.is_authenticated else None
    submission = DecisionSubmission.objects.create(
        key=key, execution=execution, checkpoint_id=requests[0].checkpoint_id, submitted_by=decided_by
    )
    for request, answer in _paired(requests, answers):
        approved_args = None
        if answer.verdict == Verdict.APPROVED:
            approved_args = answer.override_args if answer.override_args is not None else request.args
        Decision.objects.create(
            request=request,
            submission=submission,
            verdict=answer.verdict,
            override_args=answer.override_args,
            approved_args=approved_args,
            args_digest=args_digest(approved_args) if approved_args is not None else "",
            result=answer.result if answer.verdict in (Verdict.EXTERNAL_RESULT, Verdict.ANSWERED) else None,
            message=answer.message,
            decided_by=decided_by,
        )
    DeferredRequest.objects.filter(pk__in=[request.pk for request in requests]).update(status=request_status)
    publish_approvals_changed()
    announce(HostEvent.APPROVAL_DECIDED, execution=execution.pk, submission=submission.pk)
    return submission
