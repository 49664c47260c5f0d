"""Deciding from the inbox: rows show the masked arguments and decide a one-request set in place; identical
requests are grouped and one decision answers each of them alone; the execution page leads on to the next one."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse
from pydantic_ai import ToolCallPart

from runs.models import Decision, ExecutionStatus, Team, TeamRole, Thread
from tests.support import factories

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def test_tools(scenario_tools):
    """The requests here are for the approval scenarios' tools."""


@pytest.fixture
def approver(django_user_model):
    user = django_user_model.objects.create_user("decider", password="pw-decider-1")
    user.user_permissions.add(Permission.objects.get(codename="decide_deferred"))
    return user


def _one_payment(to: str = "acme", *, title: str = "payments") -> factories.Suspended:
    call = ToolCallPart("send_payment", {"amount": 5000, "to": to, "password": "hunter2"}, tool_call_id="call-pay")
    return factories.suspended_execution(approvals=(call,), title=title)


def _inbox(client, **query) -> str:
    response = client.get(reverse("runs:approvals"), query)
    assert response.status_code == 200
    return response.content.decode()


def _row_form(page: str, request_pk: int) -> dict[str, str]:
    row = re.search(rf'<tr data-request="{request_pk}".*?</tr>', page, re.S)
    assert row is not None
    form = re.search(r'<form method="post" action="([^"]+)" class="row-decision">(.*?)</form>', row[0], re.S)
    assert form is not None, row[0]
    fields = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', form[2]))
    return {"action": form[1], **fields}


def test_a_row_shows_the_masked_arguments_and_decides_its_one_request_set_in_place(client, approver):
    factories.configure_policy(redact_patterns=["password"])
    single = _one_payment()
    pair = factories.suspended_execution(title="two requests")
    client.force_login(approver)

    page = _inbox(client)
    assert "hunter2" not in page and "&quot;amount&quot;: 5000" in page and "send_payment" in page
    # A set of two is answered on its page (whole), not from a row.
    pair_row = re.search(rf'<tr data-request="{pair.requests["call-pay"].pk}".*?</tr>', page, re.S)
    assert pair_row is not None and "Decide (set of 2)" in pair_row[0] and "row-decision" not in pair_row[0]

    form = _row_form(page, single.requests["call-pay"].pk)
    action = form.pop("action")
    response = client.post(action, {**form, "decision-0-choice": "approve"})
    assert response.status_code == 302 and response["Location"].startswith("/approvals/?sort=newest")
    decision = Decision.objects.get(request=single.requests["call-pay"])
    assert decision.verdict == "approved" and decision.decided_by == approver
    single.execution.refresh_from_db()
    assert single.execution.status != ExecutionStatus.WAITING

    # Deny, with a reason, from the row.
    other = _one_payment("globex", title="second")
    form = _row_form(_inbox(client), other.requests["call-pay"].pk)
    client.post(form.pop("action"), {**form, "decision-0-choice": "deny", "decision-0-message": "not this week"})
    denial = Decision.objects.get(request=other.requests["call-pay"])
    assert denial.verdict == "denied" and denial.message == "not this week"


def test_identical_requests_are_grouped_and_one_decision_answers_each(client, approver, django_user_model):
    same = [_one_payment(title=f"same {n}") for n in range(3)]
    different = _one_payment("globex", title="different")
    client.force_login(approver)

    page = _inbox(client)
    head = re.search(r'<tr class="group-head" data-group="([\d,]+)">(.*?)</tr>', page, re.S)
    assert head is not None and "3 identical requests" in head[2]
    grouped = {int(pk) for pk in head[1].split(",")}
    assert grouped == {item.requests["call-pay"].pk for item in same}
    key = re.search(r'name="submission_key" value="([^"]+)"', head[2])
    assert key is not None

    # Meanwhile, one of them is decided by someone else: it is skipped, not decided twice.
    raced = same[0]
    form = _row_form(page, raced.requests["call-pay"].pk)
    client.post(form.pop("action"), {**form, "decision-0-choice": "deny"})

    post = {"requests": head[1], "choice": "approve", "submission_key": key[1], "next": "/approvals/"}
    response = client.post(reverse("runs:approval_group"), post, headers={"accept": "application/json"})
    outcomes = {item["request"]: item["outcome"] for item in response.json()["items"]}
    assert outcomes == {
        raced.requests["call-pay"].pk: "skipped",
        same[1].requests["call-pay"].pk: "done",
        same[2].requests["call-pay"].pk: "done",
    }
    assert Decision.objects.get(request=raced.requests["call-pay"]).verdict == "denied"
    assert Decision.objects.filter(verdict="approved").count() == 2
    assert not Decision.objects.filter(request=different.requests["call-pay"]).exists()

    # The same post again decides nothing more.
    again = client.post(reverse("runs:approval_group"), post, headers={"accept": "application/json"}).json()
    assert {item["outcome"] for item in again["items"]} == {"skipped"}
    assert Decision.objects.count() == 3


def test_a_group_decision_obeys_permission_and_set_completeness_item_by_item(client, django_user_model):
    team_b = Team.objects.create(name="team-b")
    mine = _one_payment()
    pair = factories.suspended_execution(title="two requests")
    theirs = _one_payment(title="team b")
    Thread.objects.filter(pk=theirs.execution.thread_id).update(team=team_b)
    user = factories.member(django_user_model, "approver-a", Team.objects.get(name="default"), TeamRole.APPROVER)
    client.force_login(user)

    pks = [mine.requests["call-pay"].pk, pair.requests["call-pay"].pk, theirs.requests["call-pay"].pk]
    post = {"requests": ",".join(map(str, pks)), "choice": "deny", "message": "no", "submission_key": "k-group"}
    items = client.post(reverse("runs:approval_group"), post, headers={"accept": "application/json"}).json()["items"]
    assert [item["outcome"] for item in items] == ["done", "skipped", "refused"]
    assert "The whole set must be answered at once; missing answers for: call-del" in items[1]["message"]
    assert Decision.objects.count() == 1

    viewer = factories.member(django_user_model, "viewer-a", Team.objects.get(name="default"), TeamRole.VIEWER)
    client.force_login(viewer)
    other = _one_payment(title="for the viewer")
    post = {"requests": str(other.requests["call-pay"].pk), "choice": "approve", "submission_key": "k-viewer"}
    items = client.post(reverse("runs:approval_group"), post, headers={"accept": "application/json"}).json()["items"]
    assert [item["outcome"] for item in items] == ["refused"]


@pytest.mark.parametrize(
    ("post", "message"),
    [
        ({"requests": "1,x", "choice": "approve", "submission_key": "k"}, "request numbers separated by commas"),
        ({"requests": "", "choice": "approve", "submission_key": "k"}, "This field is required"),
        ({"requests": "1", "choice": "maybe", "submission_key": "k"}, "Select a valid choice"),
        ({"requests": ",".join(map(str, range(1, 600))), "choice": "approve", "submission_key": "k"}, "At most 500"),
        ({"requests": "1", "choice": "deny", "message": "a\x07", "submission_key": "k"}, "control character"),
    ],
)
def test_bad_group_decisions_are_refused_whole(client, approver, post, message):
    client.force_login(approver)
    response = client.post(reverse("runs:approval_group"), post)
    assert response.status_code == 400 and message in response.content.decode()
    assert not Decision.objects.exists()


def test_the_execution_page_leads_on_to_the_next_waiting_request(client, approver):
    older = _one_payment(title="older")
    newer = _one_payment("globex", title="newer")
    client.force_login(approver)

    page = client.get(reverse("runs:execution", args=[older.execution.pk])).content.decode()
    link = re.search(r'<a href="([^"]+)" id="next-waiting"', page)
    assert link is not None and link[1] == reverse("runs:execution", args=[newer.execution.pk])
    page = client.get(reverse("runs:execution", args=[newer.execution.pk])).content.decode()
    link = re.search(r'<a href="([^"]+)" id="next-waiting"', page)
    assert link is not None and link[1] == reverse("runs:execution", args=[older.execution.pk])
