"""The executions list (/executions/): visibility, each filter and their combination, keyset pages, counts per
status, refused input, and the indexes its queries use. Re-run on PostgreSQL (tests/host/test_postgres.py)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from runs import views
from runs.models import AgentProfile, Execution, Team, Thread, ToolDispatch
from runs.services.lifecycle import executions as lifecycle
from runs.services.reports import ExecutionFilters, execution_page
from tests.support import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def client_in(client, operator_user):
    client.force_login(operator_user)
    return client


def _listed(client, **query) -> list[int]:
    response = client.get("/executions/", query)
    assert response.status_code == 200, response.content.decode()[:2000]
    return [int(pk) for pk in re.findall(r'data-execution="(\d+)"', response.content.decode())]


def _started(execution: Execution, at) -> Execution:
    Execution.objects.filter(pk=execution.pk).update(created_at=at)
    execution.refresh_from_db()
    return execution


def test_the_list_shows_every_visible_execution_newest_first_and_is_in_the_nav(client_in):
    first = factories.make_execution(status="completed")
    second = factories.make_execution(status="running")
    team_b = Team.objects.create(name="team-b")
    hidden = lifecycle.create_thread(AgentProfile.objects.create(name="other", model="demo", team=team_b))
    factories.make_execution(hidden, status="running")

    assert _listed(client_in) == [second.pk, first.pk]
    body = client_in.get("/").content.decode()
    assert '<a href="/executions/">Executions</a>' in body


def test_each_filter_narrows_the_list_and_they_combine(client_in, operator_user, django_user_model):
    now = timezone.now()
    failed = _started(factories.make_execution(status="failed"), now - timedelta(minutes=30))
    Execution.objects.filter(pk=failed.pk).update(failure_code="model_error")
    old_failure = _started(factories.make_execution(status="failed"), now - timedelta(days=2))
    Execution.objects.filter(pk=old_failure.pk).update(failure_code="model_error")
    completed = factories.make_execution(status="completed", input="write the weekly report")
    Execution.objects.filter(pk=completed.pk).update(created_by=operator_user)
    run = factories.make_run(completed, status="completed")
    ToolDispatch.objects.create(run=run, tool_call_id="c1", tool_name="search_docs")
    waiting = factories.suspended_execution()
    questioned = factories.suspended_execution(
        approvals=(),
        calls=(factories.ToolCallPart("ask_user", {"question": "which?"}, tool_call_id="call-q"),),
        questions=("call-q",),
    )
    other_profile = factories.make_execution(
        lifecycle.create_thread(AgentProfile.objects.create(name="research", model="demo")), status="running"
    )
    fork_source = factories.suspended_execution(title="fork source")
    Thread.objects.create(
        thread_id="forked",
        profile=fork_source.execution.thread.profile,
        forked_from=fork_source.execution.thread.selected_checkpoint,
    )

    assert _listed(client_in, status="failed") == [failed.pk, old_failure.pk]
    assert set(_listed(client_in, status="waiting")) == {
        waiting.execution.pk,
        questioned.execution.pk,
        fork_source.execution.pk,
    }
    assert set(_listed(client_in, status="waiting:approval")) == {waiting.execution.pk, fork_source.execution.pk}
    assert _listed(client_in, status="waiting:question") == [questioned.execution.pk]
    assert _listed(client_in, status="waiting:child") == []
    assert _listed(client_in, profile="research") == [other_profile.pk]
    # A tool the worker ran, or one a run waits on.
    assert _listed(client_in, tool="search_docs") == [completed.pk]
    assert set(_listed(client_in, tool="send_payment")) == {waiting.execution.pk, fork_source.execution.pk}
    assert _listed(client_in, failure="model_error") == [failed.pk, old_failure.pk]
    assert _listed(client_in, by="op") == [completed.pk]
    since = timezone.localtime(now - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")
    assert _listed(client_in, status="failed", started_from=since) == [failed.pk]
    until = timezone.localtime(now - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M")
    assert _listed(client_in, started_to=until) == [old_failure.pk]
    assert _listed(client_in, fork="yes") == [fork_source.execution.pk]
    assert fork_source.execution.pk not in _listed(client_in, fork="no")
    assert _listed(client_in, q="WEEKLY") == [completed.pk]
    assert _listed(client_in, q="weekly", status="failed") == []


def test_the_text_filter_reads_the_masked_input_never_the_stored_one(client_in):
    execution = factories.make_execution(status="completed", input="deploy with key sk-live-4242")
    Execution.objects.filter(pk=execution.pk).update(shown_input="deploy with key [masked]")

    assert _listed(client_in, q="sk-live") == []
    assert _listed(client_in, q="[masked]") == [execution.pk]
    body = client_in.get("/executions/").content.decode()
    assert "sk-live-4242" not in body and "deploy with key [masked]" in body


def test_counts_per_status_follow_the_other_filters(client_in):
    research = lifecycle.create_thread(AgentProfile.objects.create(name="research", model="demo"))
    factories.make_execution(research, status="completed")
    factories.make_execution(research, status="failed")
    factories.make_execution(status="completed")
    factories.suspended_execution()

    def counts(**query) -> dict[str, int]:
        # `counts=1`: the page as it is without scripts, after its "show counts" link.
        body = client_in.get("/executions/", {**query, "counts": "1"}).content.decode()
        found = re.findall(r'data-status-count="([^"]+)"[^>]*>[^<]*<span class="count">(\d+)</span>', body)
        return {label: int(count) for label, count in found}

    everything = counts()
    assert everything["any"] == 4 and everything["completed"] == 2 and everything["waiting for approval"] == 1
    # The status chosen does not narrow its own counts; the other filters do.
    narrowed = counts(profile="research", status="failed")
    assert narrowed["any"] == 2 and narrowed["completed"] == 1 and narrowed["failed"] == 1
    assert narrowed["waiting"] == 0 and narrowed["waiting for approval"] == 0


def test_pages_follow_the_key_of_the_last_row_not_an_offset(client_in, monkeypatch):
    monkeypatch.setattr(views, "EXECUTION_LIST_PAGE", 3)
    start = timezone.now() - timedelta(hours=1)
    made = [_started(factories.make_execution(status="completed"), start + timedelta(minutes=i)) for i in range(7)]
    # Two rows at the same moment are still told apart (by their pk).
    _started(made[3], made[2].created_at)
    newest_first = [execution.pk for execution in sorted(made, key=lambda e: (e.created_at, e.pk), reverse=True)]

    seen: list[int] = []
    query: dict[str, str] = {"status": "completed"}
    pages = []
    with CaptureQueriesContext(connection) as queries:
        while True:
            response = client_in.get("/executions/", query)
            body = response.content.decode()
            pages.append(body)
            seen += [int(pk) for pk in re.findall(r'data-execution="(\d+)"', body)]
            older = re.search(r'rel="next" href="\?([^"]+)"', body)
            if not older:
                break
            query = dict(pair.split("=", 1) for pair in older[1].replace("&amp;", "&").split("&"))
    assert seen == newest_first
    assert len(pages) == 3 and "status=completed" in pages[-1]
    assert not any("OFFSET" in entry["sql"].upper() for entry in queries.captured_queries)

    # Back to newer pages from the last one.
    newer = re.search(r'rel="prev" href="\?([^"]+)"', pages[-1])
    assert newer is not None
    back = dict(pair.split("=", 1) for pair in newer[1].replace("&amp;", "&").split("&"))
    assert _listed(client_in, **back) == newest_first[3:6]


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"status": "sleeping"}, "Select a valid choice"),
        ({"q": "x" * 10_000}, "at most 200 characters"),
        ({"started_from": "0001-01-01T00:00"}, "Choose a time between 2000-01-01 and 2999-12-31"),
        ({"started_from": "99999-01-01T00:00"}, "Enter a valid date/time"),
        ({"started_from": "2026-02-01T00:00", "started_to": "2026-01-01T00:00"}, "The end is before the start"),
        ({"after": "99999999999999999999999-1"}, "not a position in the list"),
        ({"after": "1-99999999999999999999999"}, "not a position in the list"),
        ({"before": "yesterday"}, "not a position in the list"),
        ({"profile": "nobody-has-this"}, "Select a valid choice"),
        ({"by": "ghost"}, "Select a valid choice"),
        ({"tool": "a\x00b"}, "Null characters are not allowed"),
        ({"failure": "a\x07b"}, "control character U+0007"),
    ],
)
def test_bad_filters_are_refused_with_a_message_and_the_list_unfiltered(client_in, query, message):
    execution = factories.make_execution(status="completed")
    response = client_in.get("/executions/", query)
    assert response.status_code == 400
    body = response.content.decode()
    assert message in body and "The list below is not filtered." in body
    assert f'data-execution="{execution.pk}"' in body


def _plan(queryset) -> str:
    if connection.vendor == "postgresql":
        # A test database is too small for the planner to prefer an index; the question is whether it can use one.
        with connection.cursor() as cursor:
            cursor.execute("SET enable_seqscan = off")
        try:
            return queryset.explain()
        finally:
            with connection.cursor() as cursor:
                cursor.execute("SET enable_seqscan = on")
    return queryset.explain()


@pytest.mark.parametrize(
    ("filters", "index"),
    [
        ({}, "execution_newest"),
        ({"status": "failed"}, "execution_status_newest"),
        ({"failure_code": "model_error"}, "execution_failure_newest"),
    ],
)
def test_list_queries_read_their_index(django_user_model, operator_user, filters, index):
    root = django_user_model.objects.create_superuser("root", password="pw-root-1")
    for _ in range(3):
        execution = factories.make_execution(status="failed")
        Execution.objects.filter(pk=execution.pk).update(failure_code="model_error")
    # A member's list asks each row's thread for its team. PostgreSQL's planner chooses from table statistics, and
    # for a table of three rows starts from the team's threads; SQLite's chooses from the query alone.
    viewers = (root,) if connection.vendor == "postgresql" else (root, operator_user)
    for viewer in viewers:
        page_query = ExecutionFilters(viewer=viewer, **filters).matching().order_by("-created_at", "-pk")[:51]
        assert index in _plan(page_query), viewer
        assert execution_page(ExecutionFilters(viewer=viewer, **filters), 2).older is not None


def test_the_tool_filter_reads_its_indexes(django_user_model):
    root = django_user_model.objects.create_superuser("root", password="pw-root-1")
    factories.suspended_execution()
    plan = _plan(ExecutionFilters(viewer=root, tool="send_payment").matching().order_by("-created_at", "-pk")[:51])
    assert "deferred_request_tool" in plan and "tool_dispatch_tool" in plan
