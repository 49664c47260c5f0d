"""Host-managed children (contract S72, S79) with the demo agent's `delegate_to_child` tool.

The first tests drive runs in this process (`execute_run`, no RQ) to check what each transaction leaves; the
`services` tests below run the same flows on a real RQ worker, killed with SIGKILL in one of them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.utils import timezone
from pydantic_ai import ToolFailed

from runs.demo_profile import ensure_demo_profile
from runs.harness import decode_resume
from runs.models import (
    Decision,
    DecisionSubmission,
    DeferredKind,
    DeferredRequest,
    DeferredStatus,
    Execution,
    ExecutionStatus,
    ExecutionTrigger,
    Run,
    RunReason,
    RunStatus,
    TimelineEvent,
    TimelineOrigin,
    ToolDispatch,
    Verdict,
)
from runs.services.lifecycle import (
    MAX_CHILD_DEPTH,
    Answer,
    approvals,
    cancel_execution,
    executions,
    open_requests,
    pending_requests,
    submit_decisions,
)
from runs.services.recovery import recovery
from runs.services.reports import AuditFilters
from runs.services.timeline import DECISION_EVENT_NAME
from runs.services.worker import runner
from tests.support import factories


def start(prompt: str) -> Execution:
    thread = executions.create_thread(ensure_demo_profile(), title=prompt)
    return executions.start_execution(thread, prompt)


def child_of(parent: Execution) -> Execution:
    return Execution.objects.get(parent_request__execution=parent)


def approve_all(execution: Execution, user, key: str) -> DecisionSubmission:
    execution = Execution.objects.get(pk=execution.pk)
    requests = pending_requests(execution)
    assert requests, f"execution {execution.pk} has nothing to approve"
    return submit_decisions(
        execution,
        checkpoint_id=requests[0].checkpoint_id,
        key=key,
        answers=[Answer(request.tool_call_id, Verdict.APPROVED) for request in requests],
        user=user,
    )


def drive(execution: Execution) -> None:
    """Run the execution's queued runs in this process until it is no longer queued."""
    while (run := Execution.objects.get(pk=execution.pk).runs.filter(status=RunStatus.QUEUED).first()) is not None:
        runner.execute_run(run.pk)


def child_answer(parent: Execution) -> object:
    """What the parent's resume run was given for its child call."""
    resume_run = parent.runs.get(reason=RunReason.RESUME)
    request = DeferredRequest.objects.get(execution=parent, kind=DeferredKind.CHILD)
    return decode_resume(resume_run.deferred_resume).results.calls[request.tool_call_id]


def decision_item(execution: Execution) -> dict:
    """The one decision item of the execution's timeline, which must come between its suspended run's events and
    its resume run's."""
    (event,) = TimelineEvent.objects.filter(execution=execution, event__name=DECISION_EVENT_NAME)
    resume = execution.runs.get(reason=RunReason.RESUME)
    assert event.run.reason == RunReason.INITIAL and event.origin == TimelineOrigin.HOST
    first_of_resume = execution.timeline.filter(run=resume).order_by("position").first()
    assert first_of_resume is not None
    assert event.position < first_of_resume.position
    return event.event["value"]


@pytest.mark.django_db
def test_a_child_is_started_with_the_suspension_and_its_request_is_no_operators(operator_user):
    parent = start("child: deploy release 2.0")
    drive(parent)

    parent.refresh_from_db()
    assert parent.status == ExecutionStatus.WAITING
    request = DeferredRequest.objects.get(execution=parent)
    assert (request.kind, request.tool_name, request.expires_at) == (DeferredKind.CHILD, "delegate_to_child", None)
    child = child_of(parent)
    assert (child.trigger, child.input, child.thread.profile) == (
        ExecutionTrigger.CHILD,
        "deploy release 2.0",
        parent.thread.profile,
    )
    assert child.thread != parent.thread
    # The form, the AG-UI resume and the inbox offer the operator nothing of the parent.
    assert pending_requests(parent) == []
    assert list(open_requests().filter(execution=parent)) == []

    drive(child)
    child.refresh_from_db()
    assert child.status == ExecutionStatus.WAITING
    assert [r.tool_name for r in open_requests()] == ["deploy_release"]

    approve_all(child, operator_user, "child-approval")
    drive(child)
    child.refresh_from_db()
    assert child.status == ExecutionStatus.COMPLETED
    parent.refresh_from_db()
    assert parent.status == ExecutionStatus.QUEUED
    drive(parent)
    parent.refresh_from_db()
    assert parent.status == ExecutionStatus.COMPLETED
    child_output = child.runs.order_by("-number").first().output
    assert "deployed 2.0" in child_output
    assert child_answer(parent) == child_output
    assert "deployed 2.0" in parent.runs.order_by("-number").first().output
    request.refresh_from_db()
    assert (request.status, request.decision.verdict, request.decision.decided_by) == (
        DeferredStatus.DECIDED,
        Verdict.EXTERNAL_RESULT,
        None,
    )
    # The audit lists what operators decided, not the Host's answers to children.
    assert [d.request.tool_name for d in AuditFilters().decisions()] == ["deploy_release"]


@pytest.mark.django_db
def test_a_parent_that_cannot_be_answered_stays_waiting_and_the_childs_end_still_commits(operator_user, monkeypatch):
    parent = start("child: deploy release 2.0")
    drive(parent)
    child = child_of(parent)
    drive(child)
    approve_all(child, operator_user, "child-approval")

    def broken(submission, *, child=None):
        raise RuntimeError("the decision item cannot be stored")

    monkeypatch.setattr(approvals.decision_items, "record", broken)
    drive(child)

    child.refresh_from_db()
    parent.refresh_from_db()
    assert (child.status, parent.status) == (ExecutionStatus.COMPLETED, ExecutionStatus.WAITING)
    assert DeferredRequest.objects.get(execution=parent).status == DeferredStatus.PENDING
    assert not parent.runs.filter(reason=RunReason.RESUME).exists()


def drive_all() -> None:
    """Run every queued run in this process, children's included, until none is left."""
    while (run := Run.objects.filter(status=RunStatus.QUEUED).order_by("pk").first()) is not None:
        runner.execute_run(run.pk)


@pytest.mark.django_db
def test_children_nest_at_most_max_child_depth_deep_and_a_refused_child_fails_its_call():
    parent = start("child: " * (MAX_CHILD_DEPTH + 2) + "look up REC-7")
    drive_all()

    chain = [parent]
    while (child := Execution.objects.filter(parent_request__execution=chain[-1]).first()) is not None:
        chain.append(child)
    assert len(chain) == MAX_CHILD_DEPTH + 1
    assert {execution.status for execution in Execution.objects.all()} == {ExecutionStatus.COMPLETED}
    deepest = chain[-1]
    refused = Decision.objects.get(request__execution=deepest)
    assert (refused.verdict, refused.message) == (
        Verdict.FAILED,
        f"Host-managed children nest at most {MAX_CHILD_DEPTH} deep; this child was not started.",
    )
    assert "delegate_to_child (failed)" in deepest.runs.order_by("-number").first().output


@pytest.mark.django_db
def test_an_expiry_refused_after_its_answers_were_stored_leaves_none_of_them():
    factories.configure_policy(
        approval_timeout_seconds=30,
        approval_rules=[
            {"tool": "lookup_record", "reason": "Private."},
            {"tool": "search_records", "reason": "Traces."},
        ],
    )
    execution = start("look up REC-42")
    drive(execution)
    # One request of the set is gone: the expiry stores the other's answer, then finds the set no longer matches
    # what the run suspended with.
    DeferredRequest.objects.get(execution=execution, tool_name="search_records").delete()

    report = recovery.sweep(now=timezone.now() + timedelta(seconds=60))

    assert report.expired_requests == 0
    assert not Decision.objects.exists() and not DecisionSubmission.objects.exists()
    assert DeferredRequest.objects.get(execution=execution).status == DeferredStatus.PENDING
    assert Execution.objects.get(pk=execution.pk).status == ExecutionStatus.WAITING


# --- on a real worker -------------------------------------------------------------------------------------


def wait_for(condition: Callable[[], bool], *, what: str, stack, timeout: float = 60, sweep: bool = False) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if sweep:
            recovery.sweep()
        if condition():
            return
        time.sleep(0.2)
    states = list(Execution.objects.values_list("pk", "parent_request", "status"))
    raise AssertionError(f"timed out waiting for {what}: {states}\n{stack.worker.log()[-3000:]}")


def status_of(execution: Execution) -> str:
    return Execution.objects.get(pk=execution.pk).status


def child_started(parent: Execution) -> bool:
    return Execution.objects.filter(parent_request__execution=parent).exists()


def child_waiting_for_approval(stack) -> tuple[Execution, Execution]:
    """A parent started with a child that asks for an approval, once the child waits for it."""
    parent = start("child: deploy release 2.0")
    wait_for(lambda: child_started(parent), what="the child", stack=stack)
    child = child_of(parent)
    wait_for(lambda: status_of(child) == ExecutionStatus.WAITING, what="the child's approval", stack=stack)
    return parent, child


def test_approving_inside_a_child_resumes_the_parent_with_the_childs_output(live_stack, operator_user):
    parent, child = child_waiting_for_approval(live_stack)
    assert status_of(parent) == ExecutionStatus.WAITING

    approve_all(child, operator_user, "approve-in-child")
    wait_for(lambda: status_of(parent) == ExecutionStatus.COMPLETED, what="the parent", stack=live_stack)

    child_output = Execution.objects.get(pk=child.pk).runs.order_by("-number").first().output
    assert "deployed 2.0" in child_output
    assert child_answer(parent) == child_output
    assert "deployed 2.0" in parent.runs.order_by("-number").first().output
    item = decision_item(parent)
    assert item["child"] == {"execution": child.pk, "thread": str(child.thread), "number": 1}
    assert item["decided_by"] is None and item["resume_run"] == 2
    assert [(call["tool_name"], call["verdict"], call["result"]) for call in item["calls"]] == [
        ("delegate_to_child", Verdict.EXTERNAL_RESULT, child_output)
    ]


def test_a_failed_child_fails_the_parents_call(live_stack):
    parent = start("child: fail")
    wait_for(lambda: status_of(parent) == ExecutionStatus.COMPLETED, what="the parent", stack=live_stack)

    child = child_of(parent)
    assert child.status == ExecutionStatus.FAILED
    answer = child_answer(parent)
    assert isinstance(answer, ToolFailed)
    assert child.failure_code in answer.message
    assert Decision.objects.get(request__execution=parent).verdict == Verdict.FAILED
    item = decision_item(parent)
    assert item["child"]["execution"] == child.pk
    assert item["calls"][0]["verdict"] == Verdict.FAILED and child.failure_code in item["calls"][0]["message"]


@pytest.fixture
def fast_recovery(settings):
    settings.HARNESS_RECOVERY_BACKOFF_SECONDS = 0.2
    factories.configure_policy(lease_seconds=3, max_attempts=10)


def test_a_child_killed_with_its_worker_recovers_and_answers_its_parent_once(live_stack, fast_recovery):
    parent = start("child: slow 4")
    wait_for(lambda: child_started(parent), what="the child", stack=live_stack)
    child = child_of(parent)
    wait_for(
        lambda: ToolDispatch.objects.filter(run__execution=child, tool_name="slow_step").exists(),
        what="the child's slow step",
        stack=live_stack,
    )
    live_stack.worker.kill()
    live_stack.restart_worker()
    wait_for(lambda: status_of(parent) == ExecutionStatus.COMPLETED, what="the parent", stack=live_stack, sweep=True)

    child_runs = list(Execution.objects.get(pk=child.pk).runs.order_by("number"))
    assert [(run.reason, run.status) for run in child_runs] == [
        (RunReason.INITIAL, RunStatus.ABANDONED),
        (RunReason.RECOVERY, RunStatus.COMPLETED),
    ]
    # The recovery run went on from the child's own checkpoint, not from its thread's start.
    assert child_runs[1].start_checkpoint.run == child_runs[0]
    parent_runs = list(parent.runs.order_by("number"))
    assert [(run.reason, run.status) for run in parent_runs] == [
        (RunReason.INITIAL, RunStatus.SUSPENDED),
        (RunReason.RESUME, RunStatus.COMPLETED),
    ]
    assert child_answer(parent) == child_runs[1].output
    assert DecisionSubmission.objects.filter(execution=parent).count() == 1


def test_cancelling_the_parent_cancels_its_children(live_stack, operator_user):
    parent, child = child_waiting_for_approval(live_stack)

    assert cancel_execution(parent, user=operator_user)

    child.refresh_from_db()
    assert (child.status, child.cancelled_by) == (ExecutionStatus.CANCELLED, operator_user)
    assert not DeferredRequest.objects.filter(status=DeferredStatus.PENDING).exists()
    assert list(open_requests()) == []
    parent.refresh_from_db()
    assert parent.status == ExecutionStatus.CANCELLED
    assert parent.runs.count() == 1
    # The child's end answered nothing: its parent's request was closed by the cancellation.
    assert not Decision.objects.filter(request__execution=parent).exists()


@pytest.mark.parametrize("first", ["operator", "child"])
def test_a_mixed_set_resumes_once_both_parts_are_answered_in_either_order(live_stack, operator_user, first):
    parent = start("deploy release 3.0 and a child: deploy release 4.0")
    wait_for(lambda: child_started(parent), what="the child", stack=live_stack)
    child = child_of(parent)
    wait_for(lambda: status_of(child) == ExecutionStatus.WAITING, what="the child's approval", stack=live_stack)
    parent.refresh_from_db()
    assert [(r.tool_name, r.kind) for r in DeferredRequest.objects.filter(execution=parent)] == [
        ("deploy_release", DeferredKind.APPROVAL),
        ("delegate_to_child", DeferredKind.CHILD),
    ]
    assert [r.tool_name for r in pending_requests(parent)] == ["deploy_release"]

    if first == "operator":
        submission = approve_all(parent, operator_user, "parent-first")
        assert submission.resume_run is None
        assert status_of(parent) == ExecutionStatus.WAITING
        approve_all(child, operator_user, "child-second")
    else:
        approve_all(child, operator_user, "child-first")
        wait_for(
            lambda: Decision.objects.filter(request__execution=parent).exists(), what="the child", stack=live_stack
        )
        assert status_of(parent) == ExecutionStatus.WAITING
        submission = approve_all(parent, operator_user, "parent-second")
        assert submission.resume_run is not None
    wait_for(lambda: status_of(parent) == ExecutionStatus.COMPLETED, what="the parent", stack=live_stack)

    assert parent.runs.filter(reason=RunReason.RESUME).count() == 1
    output = parent.runs.order_by("-number").first().output
    assert "deployed 3.0" in output
    assert "deployed 4.0" in output
    assert Run.objects.filter(execution=child, status=RunStatus.COMPLETED).exists()
