"""Server-rendered pages: threads list, thread, execution, run and raw event views (Django test client)."""

from __future__ import annotations

import json

import django_rq
import pytest
from ag_ui.core import ToolCallResultEvent
from django.views.defaults import server_error

from runs import views
from runs.demo_profile import ensure_demo_profile
from runs.models import Checkpoint, Execution, Thread
from runs.services.lifecycle import executions, forks
from runs.services.store import queueing
from runs.services.timeline import format_duration
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def client_in(client, operator_user):
    client.force_login(operator_user)
    return client


def test_pages_need_a_login(client):
    execution = factories.make_execution()
    for url in ["/", f"/threads/{execution.thread_id}/", f"/executions/{execution.pk}/"]:
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"].startswith("/login/")


def test_an_empty_threads_page_says_how_to_fill_it(client_in):
    body = client_in.get("/").content.decode()
    assert "No threads yet." in body
    assert "Create an agent profile first" in body and "manage.py harness_profile" in body
    assert "manage.py harness_demo" in body

    ensure_demo_profile()
    body = client_in.get("/").content.decode()
    assert "Start one with <b>New thread</b> above" in body and "manage.py harness_demo" in body
    # The form is open at once: there is nothing else on the page.
    assert '<details class="new-thread" open>' in body

    factories.make_thread("Something")
    body = client_in.get("/").content.decode()
    assert "No threads yet." not in body and '<details class="new-thread">' in body
    assert "No thread matches." in client_in.get("/", {"q": "nothing like it"}).content.decode()


def test_threads_list_searches_filters_and_pages(client_in):
    waiting = factories.make_execution(factories.make_thread("Invoice review"), status="waiting")
    factories.make_execution(factories.make_thread("Weekly report"), status="completed")
    idle = factories.make_thread("Untouched")

    body = client_in.get("/").content.decode()
    assert "Invoice review" in body and "Weekly report" in body and "Untouched" in body

    body = client_in.get("/", {"q": "invoice"}).content.decode()
    assert "Invoice review" in body and "Weekly report" not in body

    page = client_in.get("/", {"status": "waiting"}).context["page"]
    assert [thread.pk for thread in page] == [waiting.thread_id]
    assert page[0].latest_status == "waiting"

    page = client_in.get("/", {"status": "idle"}).context["page"]
    assert [thread.pk for thread in page] == [idle.pk]

    for n in range(30):
        factories.make_thread(f"Bulk {n:02d}")
    first = client_in.get("/").context["page"]
    assert len(first) == 25
    assert first[0].title == "Bulk 29"  # newest first
    second = client_in.get("/", {"page": 2}).context["page"]
    assert len(second) == 8
    assert not {t.pk for t in first} & {t.pk for t in second}
    # A new execution on an old thread brings it to the top.
    factories.make_execution(idle, status="running")
    assert client_in.get("/").context["page"][0].pk == idle.pk


def test_the_thread_search_matches_inputs_as_shown_never_a_masked_secret(client_in):
    """Searching the stored input would tell an operator which threads hold a secret the pages mask, one guess
    at a time."""
    factories.configure_policy(redact_patterns=["api_key"])
    thread = executions.create_thread(factories.make_thread().profile, title="Deploy")
    execution = executions.start_execution(thread, "deploy the site with api_key=SECRET-4711 tonight")
    assert "SECRET-4711" not in client_in.get(f"/executions/{execution.pk}/").content.decode()

    for term in ("SECRET-4711", "secret-47", "4711"):
        assert list(client_in.get("/", {"q": term}).context["page"]) == [], term
    for term in ("deploy the site", "tonight", "api_key=[redacted]"):
        assert [t.pk for t in client_in.get("/", {"q": term}).context["page"]] == [thread.pk], term


def test_pages_show_the_input_as_masked_when_it_started_instead_of_masking_it_on_every_view(client_in):
    """Masking a 20,000-character input cost each view of its execution or thread as much as its start did."""
    factories.configure_policy(redact_patterns=["api_key"])
    thread = executions.create_thread(factories.make_thread().profile, title="Deploy")
    execution = executions.start_execution(thread, "deploy the site with api_key=SECRET-4711 tonight")
    # A mark masking never writes shows which text a page reads.
    Execution.objects.filter(pk=execution.pk).update(shown_input="deploy the site with api_key=[as stored] tonight")

    for url in (f"/executions/{execution.pk}/", f"/threads/{thread.pk}/"):
        body = client_in.get(url).content.decode()
        assert "api_key=[as stored]" in body and "SECRET-4711" not in body and "api_key=[redacted]" not in body, url


def test_a_thread_title_made_from_a_prompt_is_stored_masked_so_neither_pages_nor_search_show_the_secret(client_in):
    """AG-UI and `harness_run` title a new thread with the start of its prompt; a child's title holds its task."""
    factories.configure_policy(redact_patterns=["api_key"])
    thread = executions.create_thread(factories.make_thread().profile, title="deploy with api_key=SECRET-4711")
    fork = forks.fork_thread(thread.selected_checkpoint, title="again with api_key=SECRET-4711")

    assert thread.title == "deploy with api_key=[redacted]"
    assert fork.title == "again with api_key=[redacted]"
    assert "SECRET-4711" not in client_in.get("/").content.decode()
    assert list(client_in.get("/", {"q": "SECRET-4711"}).context["page"]) == []


def test_thread_page_shows_executions_checkpoints_and_fork_lineage(client_in):
    profile = factories.make_thread().profile
    source = executions.create_thread(profile, title="Source thread")
    factories.make_execution(source, status="completed", input="first question")
    checkpoint = source.selected_checkpoint
    response = client_in.post(f"/checkpoints/{checkpoint.pk}/fork/", {"title": "My fork", "submission_key": "k-fork"})
    fork = Thread.objects.get(title="My fork")
    assert response.status_code == 302 and response["Location"] == f"/threads/{fork.pk}/"
    assert fork.forked_from == checkpoint

    body = client_in.get(f"/threads/{fork.pk}/").content.decode()
    assert "Fork lineage" in body and "Source thread" in body and f"checkpoint #{checkpoint.pk}" in body
    body = client_in.get(f"/threads/{source.pk}/").content.decode()
    assert "first question" in body and "My fork" in body
    assert f'data-checkpoint="{checkpoint.pk}"' in body


def test_a_thread_s_executions_come_a_page_at_a_time_newest_first(client_in, monkeypatch):
    monkeypatch.setattr(views, "EXECUTIONS_PER_PAGE", 2)
    thread = factories.make_thread("Busy")
    for n in range(5):
        factories.make_execution(thread, status="completed", input=f"question {n}")

    first = client_in.get(f"/threads/{thread.pk}/")
    last = client_in.get(f"/threads/{thread.pk}/", {"executions": 3})

    assert [execution.number for execution in first.context["executions"]] == [5, 4]
    assert [execution.number for execution in last.context["executions"]] == [1]
    body = first.content.decode()
    assert "page 1 of 3" in body and 'href="?executions=2"' in body and "question 2" not in body
    # Only the first page lists the newest executions, so only there is an unlisted one news.
    assert "data-newest-shown" in body and "data-newest-shown" not in last.content.decode()


def test_fork_needs_post_and_csrf(client, operator_user):
    thread = executions.create_thread(factories.make_thread().profile, title="Guarded")
    client.force_login(operator_user)
    assert client.get(f"/checkpoints/{thread.selected_checkpoint_id}/fork/").status_code == 405
    from django.test import Client

    strict = Client(enforce_csrf_checks=True)
    strict.force_login(operator_user)
    assert strict.post(f"/checkpoints/{thread.selected_checkpoint_id}/fork/").status_code == 403
    assert Checkpoint.objects.filter(kind="fork").count() == 0


def test_execution_page_renders_lanes_and_the_timeline_config(client_in):
    execution = factories.make_execution()
    first = factories.make_run(execution, status="abandoned")
    second = factories.make_run(execution, reason="recovery", previous_run=first)
    factories.append_events(first, factories.text_run_events(first, ["a", "b"], finish=False))
    factories.append_events(second, factories.text_run_events(second, ["c"], message_id="m2"))
    response = client_in.get(f"/executions/{execution.pk}/")
    body = response.content.decode()
    assert body.count('class="lane-head"') == 2
    assert first.run_id in body and second.run_id in body and "recovery" in body
    config = response.context["timeline_config"]
    assert config["socket"] == f"/ws/executions/{execution.pk}/"
    assert [(run["pk"], run["reason"], run["event_count"]) for run in config["runs"]] == [
        (first.pk, "initial", 5),
        (second.pk, "recovery", 5),
    ]


def test_raw_event_view_and_its_json(client_in):
    execution = factories.make_execution()
    run = factories.make_run(execution)
    result = ToolCallResultEvent(message_id="c1:result", tool_call_id="c1", content="<script>alert(1)</script>")
    (stored,) = factories.append_events(run, [result])
    body = client_in.get(f"/executions/{execution.pk}/events/1/").content.decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body and "<script>alert" not in body
    assert f'href="/executions/{execution.pk}/#pos-1"' in body
    data = json.loads(client_in.get(f"/executions/{execution.pk}/events/1/", {"format": "json"}).content)
    # The frame as the socket sends it.
    assert data == {
        "type": "event",
        "position": 1,
        "run_id": run.run_id,
        "run": run.pk,
        "run_number": run.number,
        "subagent_run_id": "",
        "origin": "run",
        "event": factories.encoded(result) | {"timestamp": stored.event["timestamp"]},
    }
    assert client_in.get(f"/executions/{execution.pk}/events/2/").status_code == 404


def test_run_page_lists_its_events_with_permalinks(client_in):
    execution = factories.make_execution()
    run = factories.make_run(execution, status="completed", usage={"input_tokens": 3})
    factories.append_events(run, factories.text_run_events(run, ["x"]))
    body = client_in.get(f"/runs/{run.pk}/").content.decode()
    assert f'href="/executions/{execution.pk}/#pos-3"' in body
    assert "TEXT_MESSAGE_CONTENT" in body and "input_tokens" in body


@pytest.mark.parametrize(
    ("seconds", "text"), [(3.25, "3.2 s"), (59.94, "59.9 s"), (61, "1 min 01 s"), (3725, "1 h 02 min")]
)
def test_durations_read_like_the_timeline_script_writes_them(seconds, text):
    from datetime import timedelta

    assert format_duration(timedelta(seconds=seconds)) == text


def test_an_active_execution_can_be_cancelled_from_its_page(client_in):
    execution = factories.make_execution(status="waiting")
    assert "Cancel execution" in client_in.get(f"/executions/{execution.pk}/").content.decode()
    response = client_in.post(f"/executions/{execution.pk}/cancel/")
    assert response.status_code == 302
    execution.refresh_from_db()
    assert execution.status == "cancelled"
    assert "Cancel execution" not in client_in.get(f"/executions/{execution.pk}/").content.decode()


def test_starting_an_execution_on_a_busy_thread_says_so(client_in):
    thread = executions.create_thread(factories.make_thread().profile, title="Busy")
    factories.make_execution(thread, status="running")
    response = client_in.post(
        f"/threads/{thread.pk}/executions/", {"input": "more", "submission_key": "k-busy"}, follow=True
    )
    assert "already has an active execution" in response.content.decode()
    assert thread.executions.count() == 1


def test_a_new_thread_starts_with_its_first_execution(client_in, redis_settings, django_capture_on_commit_callbacks):
    profile = factories.make_thread().profile
    with django_capture_on_commit_callbacks(execute=True):
        response = client_in.post(
            "/threads/new/", {"profile": profile.pk, "title": "Fresh", "input": "look up REC-1", "submission_key": "k1"}
        )
    thread = Thread.objects.get(title="Fresh")
    execution = thread.executions.get()
    assert response["Location"] == f"/executions/{execution.pk}/"
    assert execution.input == "look up REC-1"
    assert django_rq.get_queue("default").job_ids == [queueing.job_id(execution.runs.get().pk)]

    response = client_in.post("/threads/new/", {"profile": profile.pk, "title": "Empty", "submission_key": "k2"})
    assert response["Location"] == f"/threads/{Thread.objects.get(title='Empty').pk}/"


def test_forking_an_altered_checkpoint_is_refused_with_a_message(client_in):
    thread = executions.create_thread(factories.make_thread().profile, title="Tampered")
    Checkpoint.objects.filter(pk=thread.selected_checkpoint_id).update(digest="0" * 64)
    response = client_in.post(
        f"/checkpoints/{thread.selected_checkpoint_id}/fork/", {"submission_key": "k-tampered"}, follow=True
    )
    assert "digest does not match" in response.content.decode()
    assert not Thread.objects.filter(forked_from=thread.selected_checkpoint_id).exists()


def test_the_server_error_page_is_styled_and_renders_without_a_request_context(rf):
    response = server_error(rf.get("/"))
    body = response.content.decode()
    assert response.status_code == 500
    assert "Something went wrong" in body and "css/host.css" in body and "img/favicon.svg" in body
