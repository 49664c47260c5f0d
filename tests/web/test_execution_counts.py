"""The executions list's counts per status, fetched after the page (`/executions/counts/`): who may ask, what is
counted under which filters, refused filters, and the page without scripts (a link that counts inline)."""

from __future__ import annotations

import re

import pytest
from django.utils import timezone

from runs.models import AgentProfile, Team
from runs.services.lifecycle import executions as lifecycle
from runs.services.reports import Cursor
from tests.support import factories

pytestmark = pytest.mark.django_db

COUNTS = "/executions/counts/"


@pytest.fixture
def member(client, operator_user):
    client.force_login(operator_user)
    return client


def _counts(client, **query) -> dict[str, int]:
    response = client.get(COUNTS, query)
    assert response.status_code == 200, response.content.decode()[:2000]
    return {entry["label"]: entry["count"] for entry in response.json()["links"]}


def test_an_anonymous_visitor_is_sent_to_log_in_and_counts_nothing(client):
    factories.make_execution(status="completed")

    response = client.get(COUNTS, {"status": "completed"})

    assert response.status_code == 302 and response["Location"].startswith("/login/")


def test_another_teams_executions_are_never_counted(member):
    factories.make_execution(status="completed")
    factories.suspended_execution()
    elsewhere = AgentProfile.objects.create(name="elsewhere", model="demo", team=Team.objects.create(name="team-b"))
    for status in ("completed", "failed", "running"):
        factories.make_execution(lifecycle.create_thread(elsewhere), status=status)

    counts = _counts(member)

    assert counts["any"] == 2 and counts["completed"] == 1 and counts["waiting for approval"] == 1
    assert counts["failed"] == 0 and counts["running"] == 0
    # A filter naming the other team's profile is refused like an unknown one, not counted.
    assert member.get(COUNTS, {"profile": "elsewhere"}).status_code == 400


def test_the_other_filters_narrow_the_counts_and_the_chosen_status_is_current(member):
    for status in ("completed", "failed", "failed"):
        factories.make_execution(status=status, input="rotate the signing key")
    factories.make_execution(status="failed", input="summarise the week")
    factories.suspended_execution()

    position = str(Cursor(timezone.now(), 1))
    response = member.get(COUNTS, {"q": "signing", "status": "failed", "after": position})
    body = response.json()

    links = {entry["label"]: entry for entry in body["links"]}
    assert links["any"]["count"] == 3 and links["completed"]["count"] == 1 and links["failed"]["count"] == 2
    assert links["waiting"]["count"] == 0 and links["waiting for approval"]["count"] == 0
    # What "all matching" acts on: the chosen status included.
    assert body["total"] == 2
    assert [label for label, entry in links.items() if entry["current"]] == ["failed"]
    # Each link keeps the other filters and drops the page position.
    assert links["completed"]["url"] == "?q=signing&status=completed"
    assert links["any"]["url"] == "?q=signing"


def test_the_waiting_kinds_count_only_pending_requests(member):
    factories.suspended_execution()
    factories.suspended_execution(
        approvals=(),
        calls=(factories.ToolCallPart("ask_user", {"question": "which?"}, tool_call_id="call-q"),),
        questions=("call-q",),
    )

    counts = _counts(member, status="waiting:question")

    assert counts["waiting"] == 2 and counts["waiting for approval"] == 1 and counts["waiting for question"] == 1


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"status": "sleeping"}, "Select a valid choice"),
        ({"started_from": "0001-01-01T00:00"}, "Choose a time between 2000-01-01 and 2999-12-31"),
        ({"tool": "a\x00b"}, "Null characters are not allowed"),
        ({"by": "ghost"}, "Select a valid choice"),
    ],
)
def test_refused_filters_answer_400_with_the_reason(member, query, message):
    response = member.get(COUNTS, query)

    assert response.status_code == 400
    assert response.json()["error"].startswith("These filters are refused:") and message in response.json()["error"]


def test_the_list_leaves_the_counts_out_and_links_to_them_for_pages_without_scripts(member):
    factories.make_execution(status="failed")
    factories.make_execution(status="completed")

    body = member.get("/executions/", {"status": "failed"}).content.decode()

    assert "data-status-count" not in body
    assert 'data-counts-url="/executions/counts/?status=failed"' in body
    show = re.search(r'<a href="\?([^"]+)" data-show-counts>', body)
    assert show is not None and show[1] == "status=failed&amp;counts=1"
    inline = member.get("/executions/", {"status": "failed", "counts": "1"}).content.decode()
    found = dict(re.findall(r'data-status-count="([^"]+)"[^>]*>[^<]*<span class="count">(\d+)</span>', inline))
    assert found["any"] == "2" and found["failed"] == "1"
    assert "On all <span data-matching-total>1</span> matching" in inline and "data-counts-url" not in inline


def test_a_refused_filter_on_the_list_fetches_the_unfiltered_counts_the_list_shows(member):
    body = member.get("/executions/", {"status": "sleeping"}).content.decode()

    assert 'data-counts-url="/executions/counts/"' in body
