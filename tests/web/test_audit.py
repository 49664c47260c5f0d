"""The audit: JSON (not Python repr), links to thread, execution and runs, cancellations, and a CSV export."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.urls import reverse
from pydantic_ai import ToolCallPart

from runs.models import Decision
from runs.services.lifecycle import Answer, cancellation, submit_decisions
from runs.services.reports import CSV_COLUMNS
from runs.services.timeline import REDACTED
from tests import factories
from tests.factories import suspended_execution

pytestmark = pytest.mark.django_db

EXPORT = reverse("runs:approval_audit_export")


@pytest.fixture(autouse=True)
def test_tools(scenario_tools):
    """Every test here answers requests for the approval scenarios' tools."""


@pytest.fixture
def decided(operator_user):
    """A payment approved with edited arguments, under a policy that redacts `to`; the denial's message
    starts like a spreadsheet formula."""
    factories.configure_policy(redact_patterns=["^to$"])
    call = ToolCallPart("send_payment", {"amount": 5000, "to": "acme-secret"}, tool_call_id="call-pay")
    deny = ToolCallPart("delete_file", {"path": "/srv"}, tool_call_id="call-del")
    waiting = suspended_execution(approvals=(call, deny), title="payments")
    submission = submit_decisions(
        waiting.execution,
        checkpoint_id=waiting.checkpoint_id,
        key="audit-1",
        answers=[
            Answer("call-pay", "approved", override_args={"amount": 50, "to": REDACTED}),
            Answer("call-del", "denied", message="=HYPERLINK(1) to: acme-secret"),
        ],
        user=operator_user,
    )
    return waiting, submission


def test_decisions_show_json_and_link_to_thread_execution_and_runs(client, operator_user, decided):
    waiting, submission = decided
    client.force_login(operator_user)

    page = client.get(reverse("runs:approval_audit")).content.decode()

    execution = waiting.execution
    assert f'href="/threads/{execution.thread.pk}/"' in page
    assert f'href="/executions/{execution.pk}/"' in page
    assert f'href="/runs/{waiting.run.pk}/"' in page and f'href="/runs/{submission.resume_run.pk}/"' in page
    assert json.dumps({"amount": 50, "to": REDACTED}, indent=2).replace('"', "&quot;") in page
    assert "{'amount'" not in page, "no Python repr"
    assert "acme-secret" not in page
    assert Decision.objects.get(request__tool_call_id="call-pay").approved_args == {"amount": 50, "to": "acme-secret"}


def test_the_csv_export_has_the_filters_and_the_masking_of_the_page(client, operator_user, django_user_model, decided):
    waiting, _ = decided
    other = suspended_execution(title="other thread")
    cancellation.cancel_execution(other.execution, user=operator_user)
    client.force_login(operator_user)

    everything = list(csv.DictReader(io.StringIO(client.get(EXPORT).content.decode())))
    response = client.get(EXPORT, {"thread": waiting.execution.thread.pk})
    by_thread = list(csv.DictReader(io.StringIO(response.content.decode())))
    nobody = django_user_model.objects.create_user("nobody")
    by_user = client.get(EXPORT, {"user": nobody.pk}).content.decode()

    assert response["Content-Type"].startswith("text/csv") and "attachment" in response["Content-Disposition"]
    assert len(everything) == 4 and {row["verdict"] for row in everything} == {"approved", "denied", "cancelled"}
    assert {row["tool_call_id"] for row in by_thread} == {"call-pay", "call-del"}
    assert by_user.splitlines() == [",".join(CSV_COLUMNS)]
    paid = next(row for row in by_thread if row["tool_call_id"] == "call-pay")
    assert json.loads(paid["approved_args"]) == {"amount": 50, "to": REDACTED}
    assert (paid["edited"], paid["resume_run"], paid["suspended_run"]) == ("yes", "2", "1")
    denied = next(row for row in by_thread if row["tool_call_id"] == "call-del")
    assert denied["message"] == f"'=HYPERLINK(1) to: {REDACTED}", "masked, and never a formula"
    assert "acme-secret" not in client.get(EXPORT).content.decode()


def test_the_export_needs_a_login_and_refuses_bad_filters(client, operator_user):
    assert client.get(EXPORT).status_code == 302

    client.force_login(operator_user)
    refused = client.get(EXPORT, {"date_from": "not a date"})

    assert refused.status_code == 400 and "date" in refused.content.decode().lower()


def test_cancellations_are_listed_with_who_cancelled(client, operator_user):
    running = factories.queued_run("a long task").execution
    cancellation.cancel_execution(running, user=operator_user)
    client.force_login(operator_user)

    page = client.get(reverse("runs:approval_audit")).content.decode()

    assert "audit-cancellations" in page and f'href="/executions/{running.pk}/"' in page
    assert operator_user.username in page.split("<h2>Cancellations</h2>")[1]
