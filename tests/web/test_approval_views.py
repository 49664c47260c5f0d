"""The approvals pages over HTTP: the form, the decision post with CSRF on, the inbox and the audit."""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse
from pydantic_ai import ToolCallPart

from runs import approval_views
from runs.models import Decision, DecisionSubmission, DeferredStatus, ExecutionStatus, HostPolicy
from runs.services.lifecycle import MAX_VALUE_BYTES
from runs.services.store import publish_policy_version
from tests.support.factories import Suspended, suspended_execution

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def test_tools(scenario_tools):
    """Every test here answers requests for the approval scenarios' tools."""


@pytest.fixture
def operator(django_user_model):
    user = django_user_model.objects.create_user("decider", password="pw-decider-1")
    user.user_permissions.add(Permission.objects.get(codename="decide_deferred"))
    return user


@pytest.fixture
def viewer(django_user_model):
    return django_user_model.objects.create_user("viewer", password="pw-viewer-1")


def csrf_client(user) -> Client:
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    return client


@pytest.fixture
def suspended() -> Suspended:
    return suspended_execution()


def form_fields(html: str) -> dict[str, str]:
    """The hidden inputs of the rendered approval form, as a browser would post them."""
    form = re.search(r'<form id="approval-form".*?</form>', html, re.S)
    assert form, "the approval form is rendered"
    return dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', form.group(0)))


def load_form(client: Client, suspended: Suspended) -> dict[str, str]:
    response = client.get(reverse("runs:approval_decide", args=[suspended.execution.pk]))
    assert response.status_code == 200
    return form_fields(response.content.decode())


def good_answers(fields: dict[str, str]) -> dict[str, str]:
    rows = {value: name.split("-")[1] for name, value in fields.items() if name.endswith("-id")}
    pay, delete = rows["call-pay"], rows["call-del"]
    return {
        **fields,
        f"decision-{pay}-choice": "edit",
        f"decision-{pay}-args": json.dumps({"amount": 50, "to": "acme"}),
        f"decision-{delete}-choice": "deny",
        f"decision-{delete}-message": "not today",
    }


def assert_unchanged(suspended: Suspended) -> None:
    suspended.execution.refresh_from_db()
    assert suspended.execution.status == ExecutionStatus.WAITING
    assert not DecisionSubmission.objects.exists()
    assert set(suspended.execution.deferred_requests.values_list("status", flat=True)) == {DeferredStatus.PENDING}
    assert suspended.execution.runs.count() == 1


def decide_url(suspended: Suspended) -> str:
    return reverse("runs:approval_decide", args=[suspended.execution.pk])


def test_the_form_shows_each_request_with_its_reason_and_carries_checkpoint_and_key(client, operator, suspended):
    client.force_login(operator)
    page = client.get(reverse("runs:execution", args=[suspended.execution.pk])).content.decode()

    fields = form_fields(page)
    assert fields["checkpoint"] == str(suspended.checkpoint_id)
    assert len(fields["submission_key"]) >= 20
    assert {fields["decision-0-id"], fields["decision-1-id"]} == {"call-pay", "call-del"}
    assert "policy says send_payment needs a human" in page
    assert "&quot;amount&quot;: 5000" in page or '"amount": 5000' in page
    assert form_fields(client.get(decide_url(suspended)).content.decode())["submission_key"] != fields["submission_key"]


def test_an_operator_submits_a_whole_set_with_csrf(operator, suspended, django_capture_on_commit_callbacks):
    client = csrf_client(operator)
    fields = load_form(client, suspended)
    assert fields["csrfmiddlewaretoken"]

    with django_capture_on_commit_callbacks():
        response = client.post(decide_url(suspended), good_answers(fields))

    assert response.status_code == 302
    assert response.url == reverse("runs:execution", args=[suspended.execution.pk])
    pay = Decision.objects.get(request__tool_call_id="call-pay")
    assert (pay.decided_by, pay.approved_args) == (operator, {"amount": 50, "to": "acme"})
    assert Decision.objects.get(request__tool_call_id="call-del").message == "not today"
    assert suspended.execution.runs.count() == 2


def test_the_script_gets_json_answers(client, operator, suspended):
    client.force_login(operator)
    fields = good_answers(load_form(client, suspended))

    accepted = client.post(decide_url(suspended), fields, HTTP_ACCEPT="application/json")
    repeated = client.post(decide_url(suspended), fields, HTTP_ACCEPT="application/json")

    assert accepted.status_code == 200 and accepted.json()["ok"] is True
    assert "run 2 resumes" in accepted.json()["message"]
    assert repeated.status_code == 409
    assert repeated.json()["code"] == "duplicate"
    assert DecisionSubmission.objects.count() == 1


def test_a_post_without_csrf_token_is_refused(operator, suspended):
    client = csrf_client(operator)
    fields = good_answers(load_form(client, suspended))
    del fields["csrfmiddlewaretoken"]

    response = client.post(decide_url(suspended), fields)

    assert response.status_code == 403
    assert_unchanged(suspended)


def test_a_user_without_the_permission_sees_the_requests_read_only_and_cannot_post(viewer, operator, suspended):
    operator_client = csrf_client(operator)
    fields = good_answers(load_form(operator_client, suspended))
    client = csrf_client(viewer)

    page = client.get(reverse("runs:execution", args=[suspended.execution.pk])).content.decode()
    fields["csrfmiddlewaretoken"] = client.cookies["csrftoken"].value
    response = client.post(decide_url(suspended), fields)

    assert "send_payment" in page and "Read-only" in page
    assert 'id="approval-form"' not in page
    assert response.status_code == 403
    assert_unchanged(suspended)


def test_anonymous_posts_are_sent_to_log_in(client, suspended):
    response = client.post(decide_url(suspended), {})
    assert response.status_code == 302 and "/login/" in response.url
    assert_unchanged(suspended)


def test_a_second_tab_holding_the_old_form_gets_the_stale_error(client, operator, suspended):
    client.force_login(operator)
    first_tab = good_answers(load_form(client, suspended))
    second_tab = good_answers(load_form(client, suspended))
    client.post(decide_url(suspended), first_tab)

    response = client.post(decide_url(suspended), second_tab)

    assert response.status_code == 409
    assert "superseded" in response.content.decode()
    assert DecisionSubmission.objects.count() == 1
    assert suspended.execution.runs.count() == 2


def rejected(client, suspended, fields, status=400) -> str:
    response = client.post(decide_url(suspended), fields)
    assert response.status_code == status
    assert_unchanged(suspended)
    return response.content.decode()


def test_bad_input_is_refused_with_a_clear_message_and_no_change(client, operator, suspended):
    client.force_login(operator)
    fields = good_answers(load_form(client, suspended))
    pay_row = next(name.split("-")[1] for name, value in fields.items() if value == "call-pay")
    del_row = next(name.split("-")[1] for name, value in fields.items() if value == "call-del")

    partial = {name: value for name, value in fields.items() if not name.startswith(f"decision-{del_row}-")}
    assert "missing answers for: call-del" in rejected(client, suspended, partial)

    unknown = {**fields, f"decision-{del_row}-id": "call-nope"}
    assert "Unknown tool call ids" in rejected(client, suspended, unknown)

    wrong_category = {**fields, f"decision-{del_row}-choice": "result", f"decision-{del_row}-result": "{}"}
    assert "of kind &#x27;approval&#x27;" in rejected(client, suspended, wrong_category)

    bad_args = {**fields, f"decision-{pay_row}-args": json.dumps({"amount": "lots", "to": "acme"})}
    assert "do not fit the tool&#x27;s schema" in rejected(client, suspended, bad_args)

    malformed = {**fields, f"decision-{pay_row}-args": '{"amount": 5,'}
    assert "not valid JSON" in rejected(client, suspended, malformed)

    oversized = {**fields, f"decision-{pay_row}-args": json.dumps({"amount": 1, "to": "x" * MAX_VALUE_BYTES})}
    assert "at most" in rejected(client, suspended, oversized)

    no_choice = {**fields, f"decision-{del_row}-choice": ""}
    assert "choose how to answer" in rejected(client, suspended, no_choice)

    stale = {**fields, "checkpoint": str(suspended.checkpoint_id + 999)}
    assert "superseded" in rejected(client, suspended, stale, status=409)

    no_key = {name: value for name, value in fields.items() if name != "submission_key"}
    assert "reload the page" in rejected(client, suspended, no_key)


def test_external_results_must_be_json(client, operator):
    suspended = suspended_execution(approvals=(), calls=(ToolCallPart("lookup", {"q": "x"}, tool_call_id="c-ext"),))
    client.force_login(operator)
    fields = load_form(client, suspended)

    malformed = {**fields, "decision-0-choice": "result", "decision-0-result": "{'single': 'quotes'}"}
    assert "not valid JSON" in rejected(client, suspended, malformed)
    not_finite = {**fields, "decision-0-choice": "result", "decision-0-result": '{"v": NaN}'}
    assert "not valid JSON" in rejected(client, suspended, not_finite)

    ok = {**fields, "decision-0-choice": "result", "decision-0-result": '{"hits": [1, 2]}'}
    assert client.post(decide_url(suspended), ok).status_code == 302
    assert Decision.objects.get().result == {"hits": [1, 2]}


def test_inbox_lists_waiting_requests_oldest_first_with_expiry(client, operator):
    older = suspended_execution(title="older", expires_in=timedelta(minutes=5))
    newer = suspended_execution(title="newer")
    # The inbox lists what its user may decide (a user who may not sees none: tests/web/test_team_access.py).
    client.force_login(operator)

    page = client.get(reverse("runs:approvals")).content.decode()

    assert page.index("older") < page.index("newer")
    assert page.count('data-expires="') == 2  # the two requests of the older set
    assert reverse("runs:execution", args=[older.execution.pk]) in page
    assert reverse("runs:execution", args=[newer.execution.pk]) in page
    assert ">Decide<" in page


def test_the_inbox_and_its_rows_fragment_show_one_page_of_requests_newest_first_or_as_sorted(
    client, operator, monkeypatch
):
    monkeypatch.setattr(approval_views, "INBOX_PAGE_SIZE", 3)
    oldest, middle, newest = (suspended_execution(title=title) for title in ("oldest", "middle", "newest"))
    # The inbox lists what its user may decide.
    client.force_login(operator)

    first = client.get(reverse("runs:approvals")).content.decode()
    second = client.get(reverse("runs:approval_rows"), {"page": 2}).content.decode()

    assert first.count("<tr data-request=") == 3 and second.count("<tr data-request=") == 3
    assert "page 1 of 2" in first and 'href="?page=2"' in first
    assert 'data-inbox-page="2" data-page-size="3" data-page-count="2"' in second and 'href="?page=1"' in second
    oldest_url, newest_url = (reverse("runs:execution", args=[s.execution.pk]) for s in (oldest, newest))
    assert newest_url in first and newest_url not in second
    assert oldest_url in second and oldest_url not in first
    assert reverse("runs:execution", args=[middle.execution.pk]) in first + second

    by_age = client.get(reverse("runs:approvals"), {"sort": "oldest"}).content.decode()
    assert oldest_url in by_age and newest_url not in by_age
    refused = client.get(reverse("runs:approvals"), {"sort": "loudest"})
    assert refused.status_code == 400
    assert 'There is no sort "loudest"' in refused.content.decode()


def test_inbox_leaves_out_answered_and_superseded_sets(client, operator, suspended):
    client.force_login(operator)
    client.post(decide_url(suspended), good_answers(load_form(client, suspended)))

    page = client.get(reverse("runs:approvals")).content.decode()

    assert "Nothing is waiting" in page


def test_audit_lists_decisions_and_policy_changes_with_filters(client, operator, viewer, suspended):
    client.force_login(operator)
    client.post(decide_url(suspended), good_answers(load_form(client, suspended)))
    other = suspended_execution(title="other thread")
    policy = HostPolicy.objects.get(name="default")
    publish_policy_version(policy, created_by=viewer, comment="gate payments", approval_rules=[{"tool": "send_*"}])
    audit = reverse("runs:approval_audit")

    everything = client.get(audit).content.decode()
    by_thread = client.get(audit, {"thread": other.execution.thread.pk}).content.decode()
    by_user = client.get(audit, {"user": viewer.pk}).content.decode()
    future = client.get(audit, {"date_from": "2999-01-01"}).content.decode()

    assert "not today" in everything and "gate payments" in everything and "(edited)" in everything
    assert "No decisions match" in by_thread and "No policy changes match" in by_thread
    assert "No decisions match" in by_user and "gate payments" in by_user
    assert "No decisions match" in future and "No policy changes match" in future
