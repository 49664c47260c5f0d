"""Cancel is a decision: cancelling a waiting execution needs runs.decide_deferred and is recorded as one."""

from __future__ import annotations

import pytest

from runs.models import Decision, DeferredStatus, ExecutionStatus, TimelineEvent, Verdict
from runs.services.lifecycle import CANCEL_MESSAGE
from runs.services.timeline import DECISION_EVENT_NAME
from tests.support import factories
from tests.support.factories import suspended_execution

pytestmark = pytest.mark.django_db


@pytest.fixture
def plain_client(client, django_user_model):
    client.force_login(django_user_model.objects.create_user("viewer", password="viewer-password-1"))
    return client


@pytest.fixture
def operator_client(client, operator_user):
    client.force_login(operator_user)
    return client


def test_a_user_without_the_permission_cannot_cancel_a_waiting_execution_and_nothing_changes(plain_client):
    waiting = suspended_execution()
    url = f"/executions/{waiting.execution.pk}/"

    page = plain_client.get(url).content.decode()
    refused = plain_client.post(f"{url}cancel/")

    assert "Cancel execution" not in page
    assert refused.status_code == 403
    waiting.execution.refresh_from_db()
    assert waiting.execution.status == ExecutionStatus.WAITING
    assert (waiting.execution.cancel_requested, waiting.execution.cancelled_by, waiting.execution.cancelled_at) == (
        False,
        None,
        None,
    )
    assert set(waiting.execution.deferred_requests.values_list("status", flat=True)) == {DeferredStatus.PENDING}
    assert not Decision.objects.exists() and not TimelineEvent.objects.exists()


def test_an_approver_cancelling_a_waiting_execution_is_recorded_as_a_decision(operator_client, operator_user):
    waiting = suspended_execution()
    url = f"/executions/{waiting.execution.pk}/"

    assert "Cancel execution" in operator_client.get(url).content.decode()
    response = operator_client.post(f"{url}cancel/")

    assert response.status_code == 302
    execution = waiting.execution
    execution.refresh_from_db()
    assert (execution.status, execution.cancelled_by) == (ExecutionStatus.CANCELLED, operator_user)
    assert execution.cancelled_at is not None and execution.finished_at is not None
    assert set(execution.deferred_requests.values_list("status", flat=True)) == {DeferredStatus.EXPIRED}
    decisions = Decision.objects.filter(request__execution=execution)
    assert {(d.verdict, d.decided_by, d.message) for d in decisions} == {
        (Verdict.CANCELLED, operator_user, CANCEL_MESSAGE)
    }
    assert decisions.count() == len(waiting.requests)
    assert execution.runs.count() == 1, "nothing resumes"
    (item,) = TimelineEvent.objects.filter(execution=execution, event_type="CUSTOM").values_list("event", flat=True)
    assert item["name"] == DECISION_EVENT_NAME and item["value"]["decided_by"] == operator_user.username
    assert {call["verdict"] for call in item["value"]["calls"]} == {Verdict.CANCELLED}
    page = operator_client.get(url).content.decode()
    assert "Cancelled" in page and f"by {operator_user.username}" in page
    audit = operator_client.get("/approvals/audit/").content.decode()
    assert "verdict-cancelled" in audit and operator_user.username in audit


def test_any_user_may_stop_a_running_execution_and_who_asked_is_kept(plain_client):
    running = factories.make_execution(status="running")

    response = plain_client.post(f"/executions/{running.pk}/cancel/")

    assert response.status_code == 302
    running.refresh_from_db()
    assert running.cancel_requested and running.cancelled_by.username == "viewer"
    assert running.status == ExecutionStatus.RUNNING, "the worker stops it at its next heartbeat"
