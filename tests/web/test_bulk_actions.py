"""Bulk actions from the executions list: confirmed with a count and a sample, capped, run item by item by the
single action's rules, each item reported and audited, nothing acted on twice. The job is run in-process here."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse
from pydantic_ai import ToolCallPart

from runs.models import (
    BulkItem,
    BulkOperation,
    Decision,
    Execution,
    ExecutionStatus,
    Team,
    TeamRole,
    Thread,
)
from runs.services.lifecycle import bulk_operations
from tests.support import factories

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def test_tools(scenario_tools):
    """The requests here are for the approval scenarios' tools."""


def _one_payment(title: str) -> factories.Suspended:
    call = ToolCallPart("send_payment", {"amount": 5, "to": "acme"}, tool_call_id="call-pay")
    return factories.suspended_execution(approvals=(call,), title=title)


def _start(client, **post) -> BulkOperation:
    response = client.post(reverse("runs:bulk_action"), {**post, "confirmed": "on"})
    assert response.status_code == 302, response.content.decode()[:3000]
    operation = BulkOperation.objects.get()
    assert response["Location"] == reverse("runs:bulk_operation", args=[operation.pk])
    return operation


def _outcomes(operation: BulkOperation) -> dict[int, str]:
    return dict(operation.items.values_list("execution_id", "outcome"))


def test_a_bulk_approve_is_confirmed_with_a_count_and_a_sample_then_each_item_obeys_the_single_rules(
    client, operator_user
):
    client.force_login(operator_user)
    waiting = [_one_payment(f"pay {n}") for n in range(3)]
    pair = factories.suspended_execution(title="a set of two")
    done = factories.make_execution(status="completed")
    selected = [s.execution.pk for s in waiting] + [pair.execution.pk, done.pk]

    confirm = client.post(
        reverse("runs:bulk_action"), {"action": "approve", "scope": "selected", "execution": selected}
    )
    body = confirm.content.decode()
    assert confirm.status_code == 200 and "Approve 5 executions?" in body
    assert len(re.findall(r"<li><a href=\"/executions/\d+/\">", body)) == 5
    assert not BulkOperation.objects.exists()

    operation = _start(client, action="approve", scope="selected", execution=selected)
    assert set(_outcomes(operation).values()) == {"pending"}
    bulk_operations.run(operation.pk)
    outcomes = _outcomes(operation)
    assert [outcomes[s.execution.pk] for s in waiting] == ["done"] * 3
    assert outcomes[pair.execution.pk] == "skipped" and outcomes[done.pk] == "skipped"
    # Audited with the operation's id.
    keys = set(Decision.objects.values_list("submission__key", flat=True))
    assert keys == {f"bulk-{operation.pk}-{s.requests['call-pay'].pk}" for s in waiting}
    assert {d.decided_by for d in Decision.objects.all()} == {operator_user}

    # A second run of the job (a retry, another worker) acts on nothing again.
    BulkItem.objects.filter(operation=operation).update(outcome="pending")
    bulk_operations.run(operation.pk)
    assert Decision.objects.count() == 3
    assert {_outcomes(operation)[s.execution.pk] for s in waiting} == {"skipped"}

    progress = client.get(reverse("runs:bulk_operation", args=[operation.pk]), {"format": "json"}).json()
    assert progress["finished"] is True and progress["counts"]["skipped"] == 5


def test_a_bulk_deny_over_everything_matching_a_filter_sends_one_reason(client, operator_user):
    client.force_login(operator_user)
    waiting = [_one_payment(f"pay {n}") for n in range(2)]
    factories.make_execution(status="completed")
    operation = _start(client, action="deny", scope="matching", query="status=waiting", message="Not today.")
    assert set(_outcomes(operation)) == {s.execution.pk for s in waiting}
    bulk_operations.run(operation.pk)
    assert {(d.verdict, d.message) for d in Decision.objects.all()} == {("denied", "Not today.")}


def test_a_bulk_cancel_obeys_each_executions_rules(client, django_user_model):
    operator = factories.member(
        django_user_model, "operator-a", Team.objects.get_or_create(name="default")[0], TeamRole.OPERATOR
    )
    client.force_login(operator)
    running = factories.make_execution(status="running")
    waiting = _one_payment("waits")
    ended = factories.make_execution(status="completed")
    operation = _start(
        client, action="cancel", scope="selected", execution=[running.pk, waiting.execution.pk, ended.pk]
    )
    bulk_operations.run(operation.pk)
    outcomes = _outcomes(operation)
    # An operator may cancel a running execution; a waiting one is an approver's decision.
    assert outcomes == {running.pk: "done", waiting.execution.pk: "refused", ended.pk: "skipped"}
    running.refresh_from_db()
    assert running.cancel_requested and running.cancelled_by == operator
    waiting.execution.refresh_from_db()
    assert waiting.execution.status == ExecutionStatus.WAITING


def test_the_selection_is_the_users_visible_executions_only(client, operator_user):
    client.force_login(operator_user)
    team_b = Team.objects.create(name="team-b")
    hidden = factories.make_execution(status="running")
    Thread.objects.filter(pk=hidden.thread_id).update(team=team_b)
    mine = factories.make_execution(status="running")
    operation = _start(client, action="cancel", scope="selected", execution=[hidden.pk, mine.pk])
    assert set(_outcomes(operation)) == {mine.pk}


def test_a_bulk_action_over_the_cap_is_refused_with_a_message(client, operator_user, settings):
    settings.HARNESS_BULK_MAX_ITEMS = 2
    client.force_login(operator_user)
    for _ in range(3):
        factories.make_execution(status="running")
    response = client.post(
        reverse("runs:bulk_action"), {"action": "cancel", "scope": "matching", "query": "status=running"}
    )
    assert response.status_code == 400
    assert "3 executions match; one bulk action acts on at most 2 (HARNESS_BULK_MAX_ITEMS)" in response.content.decode()
    assert not BulkOperation.objects.exists()


@pytest.mark.parametrize(
    ("post", "message"),
    [
        ({"action": "explode", "scope": "selected", "execution": "1"}, "Select a valid choice"),
        ({"action": "cancel", "scope": "selected"}, "No execution is selected"),
        ({"action": "cancel", "scope": "matching", "query": "status=sleeping"}, "The filter is refused"),
        ({"action": "deny", "scope": "selected", "execution": "1", "message": "a\x07"}, "control character"),
    ],
)
def test_bad_bulk_input_is_refused_and_nothing_starts(client, operator_user, post, message):
    client.force_login(operator_user)
    factories.make_execution(status="running")
    response = client.post(reverse("runs:bulk_action"), post)
    assert response.status_code == 400 and message in response.content.decode()
    assert not BulkOperation.objects.exists()


def test_an_operation_is_its_users_alone(client, operator_user, django_user_model):
    execution = factories.make_execution(status="running")
    operation = bulk_operations.start(operator_user, "cancel", [execution.pk])
    client.force_login(django_user_model.objects.create_user("other", password="pw-other-1"))
    assert client.get(reverse("runs:bulk_operation", args=[operation.pk])).status_code == 404
    client.force_login(operator_user)
    page = client.get(reverse("runs:bulk_operation", args=[operation.pk])).content.decode()
    assert "pending: <b>1</b>" in page
    assert Execution.objects.count() == 1


def _failed(title: str = "broken") -> Execution:
    execution = factories.make_execution(factories.make_thread(title), status="failed")
    Execution.objects.filter(pk=execution.pk).update(failure_code="model_failed", failure_message="The model failed.")
    factories.make_run(execution, status="failed", failure_code="model_failed")
    return execution


def test_a_bulk_recover_starts_each_failed_executions_recovery_run_once(client, operator_user):
    client.force_login(operator_user)
    failed = [_failed(f"broken {n}") for n in range(2)]
    recovered_meanwhile = _failed("recovered by someone else")
    running = factories.make_execution(status="running")
    selected = [e.pk for e in failed] + [recovered_meanwhile.pk, running.pk]

    confirm = client.post(
        reverse("runs:bulk_action"), {"action": "recover", "scope": "selected", "execution": selected}
    )
    assert confirm.status_code == 200 and "Recover 4 executions?" in confirm.content.decode()
    operation = _start(client, action="recover", scope="selected", execution=selected)
    # Changed between the confirmation and the job: someone else recovered it, and it completed.
    Execution.objects.filter(pk=recovered_meanwhile.pk).update(status=ExecutionStatus.COMPLETED)
    bulk_operations.run(operation.pk)

    outcomes = _outcomes(operation)
    assert [outcomes[e.pk] for e in failed] == ["done", "done"]
    assert outcomes[recovered_meanwhile.pk] == "skipped" and outcomes[running.pk] == "skipped"
    messages = dict(operation.items.values_list("execution_id", "message"))
    assert messages[running.pk] == "It is running, not failed."
    for execution in failed:
        execution.refresh_from_db()
        assert (execution.status, execution.failure_code, execution.finished_at) == ("queued", "", None)
        [dead, recovery] = execution.runs.order_by("number")
        assert (recovery.reason, recovery.previous_run, recovery.attempt, recovery.status) == (
            "recovery",
            dead,
            2,
            "queued",
        )

    # The job run again (a retry, a second worker) starts no second recovery run.
    BulkItem.objects.filter(operation=operation).update(outcome="pending")
    bulk_operations.run(operation.pk)
    assert [e.runs.count() for e in failed] == [2, 2]
    assert {_outcomes(operation)[e.pk] for e in failed} == {"skipped"}


def test_a_bulk_recover_is_refused_without_the_operators_role(client, django_user_model):
    default = Team.objects.get_or_create(name="default")[0]
    viewer = factories.member(django_user_model, "viewer-a", default, TeamRole.VIEWER)
    execution = _failed()
    operation = bulk_operations.start(viewer, "recover", [execution.pk])
    bulk_operations.run(operation.pk)
    item = operation.items.get()
    assert (item.outcome, item.message) == ("refused", "Your role in this team does not allow recovering it.")
    execution.refresh_from_db()
    assert execution.status == ExecutionStatus.FAILED and execution.runs.count() == 1


def test_only_a_threads_latest_failed_execution_is_recovered(client, operator_user):
    execution = _failed()
    factories.make_execution(execution.thread, status="completed")
    operation = bulk_operations.start(operator_user, "recover", [execution.pk])
    bulk_operations.run(operation.pk)
    item = operation.items.get()
    assert item.outcome == "skipped" and "only the thread's latest one is recovered" in item.message
    assert execution.runs.count() == 1


def test_the_execution_page_recovers_a_failed_execution(client, operator_user, django_user_model):
    execution = _failed()
    url = reverse("runs:recover_execution", args=[execution.pk])
    viewer = factories.member(
        django_user_model, "viewer-b", Team.objects.get_or_create(name="default")[0], TeamRole.VIEWER
    )
    client.force_login(viewer)
    assert 'id="recover"' not in client.get(reverse("runs:execution", args=[execution.pk])).content.decode()
    assert client.post(url).status_code == 403

    client.force_login(operator_user)
    assert 'id="recover"' in client.get(reverse("runs:execution", args=[execution.pk])).content.decode()
    page = client.post(url, follow=True).content.decode()
    assert "Recovery run 2 is queued" in page
    assert execution.runs.filter(reason="recovery").count() == 1
    again = client.post(url, follow=True).content.decode()
    assert "It is no longer failed; nothing was done." in again
    assert execution.runs.count() == 2


def test_a_bulk_decision_over_everything_in_the_approvals_inbox(client, operator_user):
    client.force_login(operator_user)
    waiting = [_one_payment(f"pay {n}") for n in range(2)]
    pair = factories.suspended_execution(title="a set of two")
    asks = factories.suspended_execution(
        approvals=(),
        calls=(ToolCallPart("ask_user", {"question": "which?"}, tool_call_id="call-q"),),
        questions=("call-q",),
        title="a question",
    )
    inbox = client.get(reverse("runs:approvals")).content.decode()
    assert "On all 3 in the inbox" in inbox
    assert inbox.count('form="inbox-bulk-form"') == 4  # a box per approval row (two for the pair), none for questions

    confirm = client.post(
        reverse("runs:bulk_action"), {"action": "deny", "scope": "inbox", "message": "Not now.", "origin": "inbox"}
    )
    body = confirm.content.decode()
    assert confirm.status_code == 200 and "Deny 3 executions?" in body
    assert f'<a href="{reverse("runs:approvals")}">Cancel</a>' in body
    operation = _start(client, action="deny", scope="inbox", message="Not now.")
    assert set(_outcomes(operation)) == {s.execution.pk for s in [*waiting, pair]}
    bulk_operations.run(operation.pk)
    outcomes = _outcomes(operation)
    assert [outcomes[s.execution.pk] for s in waiting] == ["done", "done"] and outcomes[pair.execution.pk] == "skipped"
    assert {(d.verdict, d.message) for d in Decision.objects.all()} == {("denied", "Not now.")}
    asks.execution.refresh_from_db()
    assert asks.execution.status == ExecutionStatus.WAITING


def test_the_inbox_bulk_form_only_approves_or_denies(client, operator_user):
    client.force_login(operator_user)
    _one_payment("pay")
    response = client.post(reverse("runs:bulk_action"), {"action": "cancel", "scope": "inbox"})
    assert response.status_code == 400 and "From the approvals inbox, approve or deny." in response.content.decode()
    assert not BulkOperation.objects.exists()
