"""Policy and approvals with the real demo agent, runner and recovery sweep (in this process, no RQ)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.utils import timezone

from runs.models import (
    Decision,
    DeferredKind,
    DeferredRequest,
    DeferredStatus,
    ExecutionStatus,
    Run,
    TimelineEvent,
    ToolDispatch,
    Verdict,
)
from runs.services.lifecycle import EXPIRY_MESSAGE, Answer, executions, submit_decisions
from runs.services.recovery import recovery
from runs.services.timeline import REDACTED
from runs.services.worker import runner
from tests.support import factories

pytestmark = pytest.mark.django_db

TOOLS = ["lookup_record", "search_records", "deploy_release", "ask_operator"]
GATE_RECORDS = [
    {"tool": "lookup_record", "reason": "Records are private."},
    {"tool": "search_*", "when": {"arg": "query", "op": "contains", "value": "REC"}, "reason": "Searching for REC."},
]


@pytest.fixture
def operator(django_user_model):
    user = django_user_model.objects.create_user("decider")
    user.user_permissions.add(Permission.objects.get(codename="decide_deferred"))
    return django_user_model.objects.get(pk=user.pk)


def run_to_end(run: Run) -> str:
    return runner.execute_run(run.pk)


def dispatched(tool: str) -> list[Any]:
    return list(ToolDispatch.objects.filter(tool_name=tool).values_list("args", flat=True))


def test_policy_rules_suspend_the_demo_and_an_edited_approval_and_a_denial_resume_it(operator):
    factories.configure_policy(approval_rules=GATE_RECORDS)
    thread = factories.thread(model="demo", tools=TOOLS)
    execution = executions.start_execution(thread, "look up REC-42")

    assert run_to_end(execution.runs.get()) == "suspended"

    requests = {r.tool_name: r for r in DeferredRequest.objects.filter(execution=execution)}
    assert set(requests) == {"lookup_record", "search_records"}
    assert requests["lookup_record"].reason == "Records are private."
    assert requests["search_records"].reason == "Searching for REC."
    assert dispatched("lookup_record") == dispatched("search_records") == []
    thread.refresh_from_db()

    submission = submit_decisions(
        execution,
        checkpoint_id=thread.selected_checkpoint_id,
        key="flow-1",
        answers=[
            Answer(requests["lookup_record"].tool_call_id, Verdict.APPROVED, override_args={"record_id": "REC-7"}),
            Answer(requests["search_records"].tool_call_id, Verdict.DENIED, message="Not this time."),
        ],
        user=operator,
    )

    assert run_to_end(submission.resume_run) == "completed"
    execution.refresh_from_db()
    assert execution.status == ExecutionStatus.COMPLETED
    assert dispatched("lookup_record") == [{"record_id": "REC-7"}]
    assert dispatched("search_records") == []
    output = Run.objects.get(pk=submission.resume_run.pk).output
    assert "search_records (denied): Not this time." in output


def test_a_policy_edited_while_waiting_does_not_change_the_waiting_execution(operator):
    factories.configure_policy(approval_rules=[{"tool": "lookup_record"}])
    thread = factories.thread(model="demo", tools=TOOLS)
    execution = executions.start_execution(thread, "look up REC-1")
    assert run_to_end(execution.runs.get()) == "suspended"
    started_with = execution.policy_version
    factories.configure_policy(approval_rules=[{"tool": "lookup_record"}, {"tool": "search_records"}])
    thread.refresh_from_db()

    request = DeferredRequest.objects.get(execution=execution)
    submission = submit_decisions(
        execution,
        checkpoint_id=thread.selected_checkpoint_id,
        key="flow-2",
        answers=[Answer(request.tool_call_id, Verdict.APPROVED)],
        user=operator,
    )

    assert submission.resume_run.policy_version == started_with
    assert run_to_end(submission.resume_run) == "completed"


def test_the_next_execution_uses_the_edited_policy():
    thread = factories.thread(model="demo", tools=TOOLS)
    first = executions.start_execution(thread, "look up REC-3")
    assert run_to_end(first.runs.get()) == "completed"

    factories.configure_policy(approval_rules=[{"tool": "search_records", "reason": "new rule"}])
    second = executions.start_execution(thread, "look up REC-3")

    assert run_to_end(second.runs.get()) == "suspended"
    assert DeferredRequest.objects.get(execution=second).reason == "new rule"


def test_the_sweep_answers_an_overdue_set_with_denials_and_the_run_goes_on(redis_settings):
    factories.configure_policy(approval_timeout_seconds=30)
    thread = factories.thread(model="demo", tools=TOOLS)
    execution = executions.start_execution(thread, "deploy the release")
    assert run_to_end(execution.runs.get()) == "suspended"
    request = DeferredRequest.objects.get(execution=execution)
    assert request.expires_at is not None

    assert recovery.sweep(now=timezone.now() + timedelta(seconds=10)).expired_requests == 0
    report = recovery.sweep(now=timezone.now() + timedelta(seconds=31))

    assert report.expired_requests == 1
    request.refresh_from_db()
    decision = Decision.objects.get(request=request)
    assert (request.status, decision.verdict, decision.decided_by) == (DeferredStatus.EXPIRED, Verdict.EXPIRED, None)
    assert run_to_end(decision.submission.resume_run) == "completed"
    assert dispatched("deploy_release") == []
    assert f"deploy_release (denied): {EXPIRY_MESSAGE}" in Run.objects.get(pk=decision.submission.resume_run.pk).output


def test_the_timeline_masks_secret_looking_fields_of_the_policy():
    factories.configure_policy(redact_patterns=["record_id"])
    thread = factories.thread(model="demo", tools=TOOLS)
    execution = executions.start_execution(thread, "look up REC-42")

    assert run_to_end(execution.runs.get()) == "completed"

    args = sorted(
        event["delta"]
        for event in TimelineEvent.objects.filter(execution=execution, event_type="TOOL_CALL_ARGS").values_list(
            "event", flat=True
        )
    )
    # Only the value under the matching key is masked; the search query is not a secret.
    assert args == ['{"query": "look up REC-42"}', '{"record_id": "' + REDACTED + '"}']
    assert dispatched("lookup_record") == [{"record_id": "REC-42"}], "redaction is for the timeline only"


def test_an_operator_question_is_answered_and_the_run_uses_the_answer(operator):
    thread = factories.thread(model="demo", tools=TOOLS)
    execution = executions.start_execution(thread, "ask the operator")
    assert run_to_end(execution.runs.get()) == "suspended"
    request = DeferredRequest.objects.get(execution=execution)
    assert request.tool_name == "ask_operator"
    verdict = Verdict.ANSWERED if request.kind == DeferredKind.QUESTION else Verdict.EXTERNAL_RESULT
    thread.refresh_from_db()

    submission = submit_decisions(
        execution,
        checkpoint_id=thread.selected_checkpoint_id,
        key="flow-question",
        answers=[Answer(request.tool_call_id, verdict, result="Use staging.")],
        user=operator,
    )

    assert run_to_end(submission.resume_run) == "completed"
    assert "ask_operator (success): Use staging." in Run.objects.get(pk=submission.resume_run.pk).output
