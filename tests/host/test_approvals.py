"""Answering deferred requests: complete sets only, once, for the current checkpoint; expiry denies."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.core.exceptions import PermissionDenied
from pydantic_ai import ToolApproved, ToolCallPart, ToolDenied, ToolFailed

from runs.harness import decode_resume
from runs.models import (
    CheckpointKind,
    Decision,
    DecisionSubmission,
    DeferredStatus,
    ExecutionStatus,
    Run,
    RunReason,
    Verdict,
)
from runs.services.lifecycle import (
    EXPIRY_MESSAGE,
    MAX_VALUE_BYTES,
    Answer,
    SubmissionRejected,
    args_digest,
    expire_overdue_requests,
    submit_decisions,
)
from runs.services.store import checkpoints
from tests.support.factories import Suspended, suspended_execution

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def test_tools(scenario_tools):
    """Every test here answers requests for the approval scenarios' tools."""


@pytest.fixture
def operator(django_user_model):
    user = django_user_model.objects.create_user("decider")
    user.user_permissions.add(Permission.objects.get(codename="decide_deferred"))
    return django_user_model.objects.get(pk=user.pk)  # fresh: permissions are cached per instance


@pytest.fixture
def suspended() -> Suspended:
    return suspended_execution()


GOOD = (
    Answer("call-pay", Verdict.APPROVED, override_args={"amount": 50, "to": "acme"}),
    Answer("call-del", Verdict.DENIED, message="not today"),
)


def submit(suspended: Suspended, user, answers=GOOD, *, key="key-1", checkpoint_id=None):
    return submit_decisions(
        suspended.execution,
        checkpoint_id=suspended.checkpoint_id if checkpoint_id is None else checkpoint_id,
        key=key,
        answers=answers,
        user=user,
    )


def assert_unchanged(suspended: Suspended) -> None:
    suspended.execution.refresh_from_db()
    assert suspended.execution.status == ExecutionStatus.WAITING
    assert not DecisionSubmission.objects.filter(execution=suspended.execution).exists()
    assert not Decision.objects.filter(request__execution=suspended.execution).exists()
    assert set(suspended.execution.deferred_requests.values_list("status", flat=True)) == {DeferredStatus.PENDING}
    assert list(suspended.execution.runs.values_list("number", flat=True)) == [1]


def rejected(suspended: Suspended, user, code: str, **kwargs) -> str:
    with pytest.raises(SubmissionRejected) as info:
        submit(suspended, user, **kwargs)
    assert info.value.code == code
    assert_unchanged(suspended)
    return info.value.message


def test_an_accepted_set_is_recorded_and_resumes_the_execution(suspended, operator, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as callbacks:
        submission = submit(suspended, operator)

    assert submission.submitted_by == operator
    assert submission.checkpoint_id == suspended.checkpoint_id
    pay = Decision.objects.get(request__tool_call_id="call-pay")
    deny = Decision.objects.get(request__tool_call_id="call-del")
    assert (pay.verdict, pay.override_args, pay.approved_args) == (
        Verdict.APPROVED,
        {"amount": 50, "to": "acme"},
        {"amount": 50, "to": "acme"},
    )
    assert pay.args_digest == args_digest({"amount": 50, "to": "acme"})
    assert pay.decided_by == operator and pay.decided_at is not None
    assert (deny.verdict, deny.message, deny.approved_args, deny.args_digest) == (Verdict.DENIED, "not today", None, "")
    assert set(suspended.execution.deferred_requests.values_list("status", flat=True)) == {DeferredStatus.DECIDED}

    resume_run = submission.resume_run
    assert (resume_run.number, resume_run.reason, resume_run.previous_run) == (2, RunReason.RESUME, suspended.run)
    resume = decode_resume(resume_run.deferred_resume)
    assert resume.results.approvals == {
        "call-pay": ToolApproved(override_args={"amount": 50, "to": "acme"}),
        "call-del": ToolDenied("not today"),
    }
    assert resume.recovery is False
    assert [entry.target_call.tool_call_id for entry in resume.requests.approvals] == ["call-pay", "call-del"]
    suspended.execution.refresh_from_db()
    assert suspended.execution.status == ExecutionStatus.QUEUED
    assert callbacks, "the resume run is enqueued (and published) after the commit"


def test_a_plain_approval_records_the_original_arguments(suspended, operator):
    submit(suspended, operator, (Answer("call-pay", Verdict.APPROVED), Answer("call-del", Verdict.APPROVED)))

    pay = Decision.objects.get(request__tool_call_id="call-pay")
    assert pay.override_args is None
    assert pay.approved_args == {"amount": 5000, "to": "acme"}
    assert pay.args_digest == args_digest({"to": "acme", "amount": 5000})
    resume = decode_resume(Run.objects.get(execution=suspended.execution, number=2).deferred_resume)
    assert resume.results.approvals["call-pay"] == ToolApproved()


def test_the_digest_of_approved_arguments_is_keyed_by_the_server(settings):
    """The audit shows it to every reader beside the masked arguments: an unkeyed hash would confirm guesses."""
    args = {"api_key": "4821", "to": "acme"}
    keyed = args_digest(args)

    assert keyed == args_digest({"to": "acme", "api_key": "4821"}), "stable for equal arguments"
    assert keyed != hashlib.sha256(b'{"api_key":"4821","to":"acme"}').hexdigest()
    assert len(keyed) == 64 and keyed != args_digest({"api_key": "4822", "to": "acme"})
    settings.SECRET_KEY = "another server's key"
    assert args_digest(args) != keyed


def test_external_results_and_question_answers_become_call_results(operator):
    suspended = suspended_execution(
        approvals=(),
        calls=(
            ToolCallPart("lookup", {"q": "weather"}, tool_call_id="call-ext"),
            ToolCallPart("ask_user_question", {"question": "Which city?"}, tool_call_id="call-ask"),
            ToolCallPart("lookup", {"q": "news"}, tool_call_id="call-refused"),
        ),
        questions=("call-ask",),
    )

    submit(
        suspended,
        operator,
        (
            Answer("call-ext", Verdict.EXTERNAL_RESULT, result={"temp": 21}),
            Answer("call-ask", Verdict.ANSWERED, result="Vienna"),
            Answer("call-refused", Verdict.DENIED, message="no news today"),
        ),
    )

    resume = decode_resume(Run.objects.get(execution=suspended.execution, number=2).deferred_resume)
    assert resume.results.calls["call-ext"] == {"temp": 21}
    assert resume.results.calls["call-ask"] == "Vienna"
    refused = resume.results.calls["call-refused"]
    assert isinstance(refused, ToolFailed) and refused.message == "no news today"
    assert Decision.objects.get(request__tool_call_id="call-ask").result == "Vienna"


def test_a_set_for_another_checkpoint_is_stale(suspended, operator):
    message = rejected(suspended, operator, "stale", checkpoint_id=suspended.checkpoint_id + 1000)
    assert "superseded" in message


def test_a_set_is_stale_once_the_thread_moved_to_another_checkpoint(suspended, operator):
    thread = suspended.execution.thread
    moved = checkpoints.create(thread, checkpoints.load(thread.selected_checkpoint), kind=CheckpointKind.FORK)
    old_checkpoint = suspended.checkpoint_id
    thread.selected_checkpoint = moved
    thread.save(update_fields=["selected_checkpoint"])

    rejected(suspended, operator, "stale", checkpoint_id=old_checkpoint)


def test_a_repeated_key_changes_nothing_a_second_time(suspended, operator):
    first = submit(suspended, operator)

    with pytest.raises(SubmissionRejected) as info:
        submit(suspended, operator)

    assert info.value.code == "duplicate"
    assert list(DecisionSubmission.objects.values_list("pk", flat=True)) == [first.pk]
    assert suspended.execution.runs.count() == 2


def test_a_second_form_after_an_accepted_set_is_stale(suspended, operator):
    submit(suspended, operator, key="tab-1")

    with pytest.raises(SubmissionRejected) as info:
        submit(suspended, operator, key="tab-2")

    assert info.value.code == "stale"
    assert DecisionSubmission.objects.count() == 1
    assert suspended.execution.runs.count() == 2


def test_a_partial_set_is_refused(suspended, operator):
    message = rejected(suspended, operator, "incomplete", answers=GOOD[:1])
    assert "call-del" in message


def test_unknown_call_ids_are_refused(suspended, operator):
    message = rejected(suspended, operator, "unknown_call", answers=(*GOOD, Answer("call-x", Verdict.APPROVED)))
    assert "call-x" in message


def test_a_request_answered_twice_is_refused(suspended, operator):
    rejected(suspended, operator, "repeated", answers=(*GOOD, Answer("call-del", Verdict.APPROVED)))


@pytest.mark.parametrize(
    "answer",
    [
        Answer("call-del", Verdict.EXTERNAL_RESULT, result={"deleted": True}),
        Answer("call-del", Verdict.ANSWERED, result="yes"),
        Answer("call-del", "maybe"),
    ],
)
def test_an_answer_of_the_wrong_category_is_refused(suspended, operator, answer):
    rejected(suspended, operator, "wrong_category", answers=(GOOD[0], answer))


def test_an_approval_for_an_external_call_is_refused(operator):
    suspended = suspended_execution(approvals=(), calls=(ToolCallPart("lookup", {"q": "x"}, tool_call_id="c-ext"),))
    rejected(suspended, operator, "wrong_category", answers=(Answer("c-ext", Verdict.APPROVED),))


@pytest.mark.parametrize(
    "edited",
    [{"amount": "lots", "to": "acme"}, {"amount": 5}, {"amount": 5, "to": "acme", "memo": "x"}],
    ids=["wrong type", "missing argument", "unknown argument"],
)
def test_edited_arguments_failing_the_tool_schema_are_refused(suspended, operator, edited):
    message = rejected(
        suspended,
        operator,
        "invalid_args",
        answers=(Answer("call-pay", Verdict.APPROVED, override_args=edited), GOOD[1]),
    )
    assert "send_payment" in message


def test_oversized_edited_arguments_are_refused(suspended, operator):
    huge = {"amount": 1, "to": "x" * (MAX_VALUE_BYTES + 1)}
    rejected(
        suspended, operator, "too_large", answers=(Answer("call-pay", Verdict.APPROVED, override_args=huge), GOOD[1])
    )


def test_non_finite_external_results_are_refused(operator):
    suspended = suspended_execution(approvals=(), calls=(ToolCallPart("lookup", {"q": "x"}, tool_call_id="c-ext"),))
    rejected(
        suspended,
        operator,
        "invalid_result",
        answers=(Answer("c-ext", Verdict.EXTERNAL_RESULT, result={"v": float("nan")}),),
    )


def test_an_empty_question_answer_is_refused(operator):
    suspended = suspended_execution(
        approvals=(), calls=(ToolCallPart("ask_user_question", {"question": "?"}, tool_call_id="q"),), questions=("q",)
    )
    rejected(suspended, operator, "invalid_result", answers=(Answer("q", Verdict.ANSWERED, result="  "),))


def test_users_without_the_permission_cannot_answer(suspended, django_user_model):
    viewer = django_user_model.objects.create_user("viewer")

    with pytest.raises(PermissionDenied):
        submit(suspended, viewer)

    assert_unchanged(suspended)


def test_overdue_sets_are_answered_with_denials_only(operator):
    overdue = suspended_execution(
        calls=(ToolCallPart("lookup", {"q": "x"}, tool_call_id="c-ext"),), expires_in=timedelta(seconds=-1)
    )
    waiting = suspended_execution(expires_in=timedelta(hours=1), title="later")
    never = suspended_execution(title="never")

    assert expire_overdue_requests() == 1

    decisions = Decision.objects.filter(request__execution=overdue.execution)
    assert {d.verdict for d in decisions} == {Verdict.EXPIRED}
    assert {d.decided_by for d in decisions} == {None}
    assert all(d.approved_args is None and d.message == EXPIRY_MESSAGE for d in decisions)
    assert set(overdue.execution.deferred_requests.values_list("status", flat=True)) == {DeferredStatus.EXPIRED}
    submission = DecisionSubmission.objects.get(execution=overdue.execution)
    assert submission.submitted_by is None
    resume = decode_resume(submission.resume_run.deferred_resume)
    assert resume.results.approvals == {"call-pay": ToolDenied(EXPIRY_MESSAGE), "call-del": ToolDenied(EXPIRY_MESSAGE)}
    assert isinstance(resume.results.calls["c-ext"], ToolFailed)
    assert_unchanged(waiting)
    assert_unchanged(never)
    assert expire_overdue_requests() == 0


def test_an_expired_set_can_no_longer_be_answered(operator):
    overdue = suspended_execution(expires_in=timedelta(seconds=-1))
    expire_overdue_requests()

    with pytest.raises(SubmissionRejected) as info:
        submit(overdue, operator)

    assert info.value.code == "stale"
    assert Decision.objects.filter(submission__submitted_by=operator).count() == 0


def test_a_set_that_cannot_be_expired_does_not_stop_the_others():
    broken = suspended_execution(expires_in=timedelta(seconds=-1), title="broken")
    broken.run.journal.all().delete()
    fine = suspended_execution(expires_in=timedelta(seconds=-1), title="fine")

    assert expire_overdue_requests() == 1

    assert_unchanged(broken)
    assert set(fine.execution.deferred_requests.values_list("status", flat=True)) == {DeferredStatus.EXPIRED}


def test_a_set_past_its_timeout_is_refused_even_before_the_sweep_expires_it(operator):
    overdue = suspended_execution(expires_in=timedelta(seconds=-1))

    assert "timeout" in rejected(overdue, operator, "expired")

    assert_unchanged(overdue)
