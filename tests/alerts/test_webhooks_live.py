"""Webhooks end to end: the RQ worker runs a demo deploy, and a real local HTTP server receives the approval
request, the decision and the completion, each signed with the webhook's secret."""

from __future__ import annotations

import json

import pytest

from alerts.models import DeliveryStatus, Webhook, WebhookDelivery
from runs.models import DEFAULT_TEAM, ExecutionStatus, Team, Verdict
from runs.services.lifecycle import Answer, executions, submit_decisions
from runs.services.store.host_events import HostEvent
from tests.support import factories
from tests.support.host_runs import DEMO_TOOLS
from tests.support.services import wait_until
from tests.support.webhook_receiver import WebhookReceiver

SECRET = "live-secret-for-tests"


@pytest.fixture
def receiver():
    with WebhookReceiver() as server:
        yield server


def test_a_deploy_s_approval_decision_and_completion_reach_a_signed_webhook(live_stack, receiver, operator_user):
    Webhook.objects.create(
        name="ops",
        team=Team.objects.get_or_create(name=DEFAULT_TEAM)[0],
        url=f"{receiver.url}/ok",
        events=[event.value for event in HostEvent],
        secret=SECRET,
    )
    thread = factories.thread(model="demo", tools=DEMO_TOOLS)
    execution = executions.start_execution(thread, "deploy release 2.0")

    wait_until(lambda: receiver.of_event("approval.requested"), timeout=60, what="the approval request's webhook")
    [requested] = receiver.of_event("approval.requested")
    assert requested.signed_by(SECRET)
    body = json.loads(requested.body)
    assert body["execution"]["id"] == execution.pk
    assert [request["tool"] for request in body["requests"]] == ["deploy_release"]

    thread.refresh_from_db()
    [request] = execution.deferred_requests.all()
    submit_decisions(
        execution,
        checkpoint_id=thread.selected_checkpoint_id,
        key="live-webhook-1",
        answers=[Answer(request.tool_call_id, Verdict.APPROVED)],
        user=operator_user,
    )

    wait_until(lambda: receiver.of_event("execution.completed"), timeout=60, what="the completion's webhook")
    wait_until(lambda: receiver.of_event("approval.decided"), timeout=60, what="the decision's webhook")
    [decided] = receiver.of_event("approval.decided")
    [completed] = receiver.of_event("execution.completed")
    assert decided.signed_by(SECRET) and completed.signed_by(SECRET)
    assert json.loads(decided.body)["decisions"] == [
        {"request": request.pk, "tool": "deploy_release", "verdict": "approved", "decided_by": "op", "message": ""}
    ]
    assert json.loads(completed.body)["execution"]["status"] == ExecutionStatus.COMPLETED

    def logged() -> bool:
        return WebhookDelivery.objects.filter(status=DeliveryStatus.DELIVERED).count() == 3

    wait_until(logged, timeout=30, what="the delivery log to show three deliveries")
    assert set(WebhookDelivery.objects.values_list("response_code", "attempts")) == {(204, 1)}
