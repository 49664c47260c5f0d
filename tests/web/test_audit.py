"""The audit: JSON (not Python repr), links to thread, execution and runs, keyed digests, cancellations (and
dropped cancel requests), and a CSV export."""

from __future__ import annotations

import csv
import hashlib
import io
import json

import pytest
from asgiref.sync import async_to_sync
from django.db import transaction
from django.urls import reverse
from pydantic_ai import ToolCallPart

from runs import approval_views
from runs.models import Decision
from runs.services.lifecycle import Answer, args_digest, cancellation, submit_decisions
from runs.services.lifecycle.approvals import canonical_json
from runs.services.reports import CSV_COLUMNS
from runs.services.timeline import REDACTED
from tests import factories
from tests.factories import suspended_execution

pytestmark = pytest.mark.django_db

EXPORT = reverse("runs:approval_audit_export")


def export_chunks(client, **filters) -> list[bytes]:
    response = client.get(EXPORT, filters)
    assert response.status_code == 200 and response.streaming
    assert response["Content-Type"].startswith("text/csv") and "attachment" in response["Content-Disposition"]

    async def served() -> list[bytes]:
        # As daphne serves it: each piece is sent as the response's iterator yields it.
        return [chunk async for chunk in response.streaming_content]

    return async_to_sync(served)()


def exported(client, **filters) -> str:
    return b"".join(export_chunks(client, **filters)).decode()


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

    everything = list(csv.DictReader(io.StringIO(exported(client))))
    by_thread = list(csv.DictReader(io.StringIO(exported(client, thread=waiting.execution.thread.pk))))
    nobody = django_user_model.objects.create_user("nobody")
    by_user = exported(client, user=nobody.pk)

    assert len(everything) == 4 and {row["verdict"] for row in everything} == {"approved", "denied", "cancelled"}
    assert {row["tool_call_id"] for row in by_thread} == {"call-pay", "call-del"}
    assert by_user.splitlines() == [",".join(CSV_COLUMNS)]
    paid = next(row for row in by_thread if row["tool_call_id"] == "call-pay")
    assert json.loads(paid["approved_args"]) == {"amount": 50, "to": REDACTED}
    assert (paid["edited"], paid["resume_run"], paid["suspended_run"]) == ("yes", "2", "1")
    denied = next(row for row in by_thread if row["tool_call_id"] == "call-del")
    assert denied["message"] == f"'=HYPERLINK(1) to: {REDACTED}", "masked, and never a formula"
    assert "acme-secret" not in exported(client)


def test_the_export_streams_its_rows_a_batch_at_a_time(client, operator_user, decided, monkeypatch):
    monkeypatch.setattr(approval_views, "EXPORT_BATCH_ROWS", 2)
    other = suspended_execution(title="other thread")
    cancellation.cancel_execution(other.execution, user=operator_user)
    client.force_login(operator_user)

    chunks = export_chunks(client)

    # The header and four decisions, two lines a batch: never the whole export in one piece.
    assert [chunk.count(b"\r\n") for chunk in chunks] == [2, 2, 1]
    assert b"".join(chunks).decode().startswith(",".join(CSV_COLUMNS))


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


def test_the_digest_shown_is_keyed_so_it_cannot_confirm_a_guess_of_masked_arguments(
    client, admin_client, operator_user, decided
):
    pay = Decision.objects.get(request__tool_call_id="call-pay")
    unkeyed = hashlib.sha256(canonical_json(pay.approved_args).encode()).hexdigest()
    client.force_login(operator_user)

    page = client.get(reverse("runs:approval_audit")).content.decode()
    rows = list(csv.DictReader(io.StringIO(exported(client))))
    admin_pages = (
        admin_client.get(reverse("admin:runs_decision_changelist")).content.decode()
        + admin_client.get(reverse("admin:runs_decision_change", args=[pay.pk])).content.decode()
    )

    assert pay.args_digest == args_digest({"to": "acme-secret", "amount": 50}) != unkeyed
    assert pay.args_digest[:16] in page and pay.args_digest in admin_pages
    assert next(row["args_digest"] for row in rows if row["tool_call_id"] == "call-pay") == pay.args_digest
    for shown in (page, admin_pages, exported(client)):
        assert unkeyed[:16] not in shown


def test_a_cancel_request_dropped_because_the_run_suspended_first_is_listed_with_who_asked(
    client, operator_user, django_user_model
):
    run, _ = factories.leased_run()
    viewer = django_user_model.objects.create_user("viewer")
    cancellation.cancel_execution(run.execution, user=viewer)
    with transaction.atomic():
        cancellation.drop_unseen_request(run.execution_id, run.pk)
    client.force_login(operator_user)

    section = client.get(reverse("runs:approval_audit")).content.decode().split("<h2>Cancellations</h2>")[1]
    by_operator = client.get(reverse("runs:approval_audit"), {"user": operator_user.pk}).content.decode()
    execution_page = client.get(reverse("runs:execution", args=[run.execution_id])).content.decode()

    assert "No cancellations match." in section, "the request did not cancel anything"
    dropped = section.split("audit-dropped-cancels")[1].split("</table>")[0]
    assert "viewer" in dropped and f'href="/executions/{run.execution_id}/"' in dropped
    assert f'href="/runs/{run.pk}/">run 1</a> suspended first' in dropped
    assert "audit-dropped-cancels" not in by_operator
    assert "Cancel request dropped" in execution_page and "by viewer" in execution_page
