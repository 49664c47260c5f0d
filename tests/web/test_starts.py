"""Starting work over HTTP while the queue (Redis) is unreachable, and posting the same start form twice.

"Unreachable" is real: the settings point django-rq and Channels at a port nothing listens on, so every
Redis call is refused as it would be with Redis stopped.
"""

from __future__ import annotations

import re
from datetime import timedelta
from io import StringIO

import django_rq
import pytest
from django.core.cache import cache
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from harness_site.settings import channel_layer_config
from runs.management.commands import harness_demo
from runs.models import Checkpoint, Execution, ExecutionStatus, Run, RunStatus, StartSubmission, Thread
from runs.services.lifecycle import executions, starts
from runs.services.recovery import recovery
from runs.services.store import queueing
from tests import factories
from tests.factories import suspended_execution
from tests.services import free_port

NOTICE = "The queue (Redis) cannot be reached right now"
BANNER = 'id="queue-banner"'
WAITING = 'id="queue-wait"'


def use_queue(settings, url: str) -> None:
    """Point django-rq and Channels of this process at `url`, and forget the cached reachability."""
    settings.RQ_QUEUES = {"default": {"URL": url, "DEFAULT_TIMEOUT": 600}}
    settings.CHANNEL_LAYERS = {"default": channel_layer_config(url)}
    cache.clear()


@pytest.fixture
def dead_queue(settings):
    url = f"redis://127.0.0.1:{free_port()}/0"
    use_queue(settings, url)
    yield url
    cache.clear()


@pytest.fixture
def browser_like(operator_user) -> Client:
    """A logged-in client that enforces CSRF, as a browser posting the rendered forms would meet it."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator_user)
    return client


def form_of(client: Client, url: str, action: str) -> dict[str, str]:
    """The hidden fields (CSRF token, submission key) of the form posting to `action` on the page at `url`."""
    html = client.get(url).content.decode()
    form = re.search(rf'<form[^>]*action="{re.escape(action)}".*?</form>', html, re.S)
    assert form, f"a form posting to {action} on {url}"
    return dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', form.group(0)))


@pytest.mark.django_db(transaction=True)
def test_starting_work_while_the_queue_is_unreachable_answers_with_a_notice_and_keeps_it_queued(
    browser_like, redis_settings, settings
):
    use_queue(settings, f"redis://127.0.0.1:{free_port()}/0")
    profile = factories.make_thread().profile
    fields = form_of(browser_like, "/", "/threads/new/")
    response = browser_like.post("/threads/new/", {**fields, "profile": profile.pk, "input": "look up REC-7"})
    execution = Execution.objects.get(input="look up REC-7")
    assert response.status_code == 302 and response["Location"] == f"/executions/{execution.pk}/"
    assert execution.status == ExecutionStatus.QUEUED
    assert execution.runs.get().status == RunStatus.QUEUED

    page = browser_like.get(response["Location"]).content.decode()
    assert NOTICE in page and BANNER in page and WAITING in page

    thread = execution.thread
    Execution.objects.filter(pk=execution.pk).update(status=ExecutionStatus.COMPLETED)
    fields = form_of(browser_like, f"/threads/{thread.pk}/", f"/threads/{thread.pk}/executions/")
    response = browser_like.post(f"/threads/{thread.pk}/executions/", {**fields, "input": "and REC-8"}, follow=True)
    assert response.status_code == 200 and NOTICE in response.content.decode()
    second = thread.executions.get(input="and REC-8")
    assert second.status == ExecutionStatus.QUEUED

    # Redis answers again: the sweep sends the jobs.
    use_queue(settings, redis_settings.url)
    later = timezone.now() + timedelta(minutes=5)
    assert recovery.sweep(now=later).requeued == 2
    runs = Run.objects.filter(execution__in=[execution, second])
    # (A worker of the session's stack may already be running them: the jobs exist, queued or taken.)
    assert all(django_rq.get_queue("default").fetch_job(queueing.job_id(run.pk)) for run in runs)
    assert WAITING not in browser_like.get(f"/executions/{second.pk}/").content.decode()
    assert BANNER not in browser_like.get("/").content.decode()


@pytest.mark.django_db(transaction=True)
def test_an_approval_accepted_while_the_queue_is_down_says_the_resume_waits(dead_queue, browser_like, scenario_tools):
    suspended = suspended_execution()
    client = browser_like
    fields = dict(
        re.findall(
            r'<input type="hidden" name="([^"]+)" value="([^"]*)"',
            client.get(f"/executions/{suspended.execution.pk}/approvals/").content.decode(),
        )
    )
    rows = {value: name.split("-")[1] for name, value in fields.items() if name.endswith("-id")}
    answers = {f"decision-{row}-choice": "deny" for row in rows.values()}
    response = client.post(f"/executions/{suspended.execution.pk}/approvals/", {**fields, **answers}, follow=True)
    assert response.status_code == 200
    assert NOTICE in response.content.decode()
    resume = suspended.execution.runs.get(number=2)
    assert resume.status == RunStatus.QUEUED


@pytest.mark.django_db(transaction=True)
def test_each_start_form_posted_twice_creates_once_and_answers_with_the_first_result(browser_like, dead_queue):
    profile = factories.make_thread().profile
    fields = {**form_of(browser_like, "/", "/threads/new/"), "profile": profile.pk, "title": "Twice", "input": "hi"}
    first, repeat = (browser_like.post("/threads/new/", fields) for _ in range(2))
    assert Thread.objects.filter(title="Twice").count() == 1
    assert first["Location"] == repeat["Location"] == f"/executions/{Execution.objects.get(input='hi').pk}/"

    thread = Thread.objects.get(title="Twice")
    Execution.objects.filter(thread=thread).update(status=ExecutionStatus.COMPLETED)
    action = f"/threads/{thread.pk}/executions/"
    fields = {**form_of(browser_like, f"/threads/{thread.pk}/", action), "input": "again"}
    first, repeat = (browser_like.post(action, fields, follow=True) for _ in range(2))
    assert thread.executions.count() == 2
    assert first.redirect_chain == repeat.redirect_chain
    assert "already submitted" in repeat.content.decode()

    checkpoint = thread.selected_checkpoint_id
    action = f"/checkpoints/{checkpoint}/fork/"
    fields = {**form_of(browser_like, f"/threads/{thread.pk}/", action), "title": "Forked once"}
    first, repeat = (browser_like.post(action, fields) for _ in range(2))
    assert Thread.objects.filter(title="Forked once").count() == 1
    assert first["Location"] == repeat["Location"]
    assert Checkpoint.objects.filter(kind="fork").count() == 1
    assert StartSubmission.objects.count() == 3


@pytest.mark.django_db(transaction=True)
def test_a_repeat_that_races_past_the_check_is_stopped_by_the_unique_key(operator_user, dead_queue, monkeypatch):
    profile = factories.make_thread().profile
    first = starts.new_thread("same-key", operator_user, profile=profile, title="Raced", input="go")
    # The second post looks before the first committed: its check finds nothing, so the key row must decide.
    looked = []
    real_first = starts._first

    def late_check(key, user):
        looked.append(key)
        return None if len(looked) == 1 else real_first(key, user)

    monkeypatch.setattr(starts, "_first", late_check)
    repeat = starts.new_thread("same-key", operator_user, profile=profile, title="Raced", input="go")
    assert repeat.repeated and repeat.execution == first.execution
    assert Thread.objects.filter(title="Raced").count() == 1 and Execution.objects.filter(input="go").count() == 1


@pytest.mark.django_db
def test_a_start_form_without_its_key_or_with_someone_elses_creates_nothing(browser_like, django_user_model):
    profile = factories.make_thread().profile
    fields = form_of(browser_like, "/", "/threads/new/")
    response = browser_like.post(
        "/threads/new/",
        {"csrfmiddlewaretoken": fields["csrfmiddlewaretoken"], "profile": profile.pk, "title": "Keyless"},
        follow=True,
    )
    assert "no submission key" in response.content.decode()
    assert not Thread.objects.filter(title="Keyless").exists()

    other = django_user_model.objects.create_user("other", password="pw-other-1")
    starts.new_thread("taken", other, profile=profile, title="Theirs", input="")
    response = browser_like.post(
        "/threads/new/", {**fields, "submission_key": "taken", "profile": profile.pk, "title": "Mine"}, follow=True
    )
    assert "already used by someone else" in response.content.decode()
    assert not Thread.objects.filter(title="Mine").exists()


@pytest.mark.django_db(transaction=True)
def test_harness_run_says_when_the_queue_is_unreachable(dead_queue):
    out, err = StringIO(), StringIO()
    call_command("harness_run", "look up REC-1", "--timeout", "0.2", stdout=out, stderr=err)
    assert NOTICE in err.getvalue()
    execution = Execution.objects.get(input="look up REC-1")
    assert execution.status == ExecutionStatus.QUEUED and executions.Run.objects.get(execution=execution)


@pytest.mark.django_db(transaction=True)
def test_harness_demo_says_when_the_queue_is_unreachable(dead_queue):
    out, err = StringIO(), StringIO()
    call_command("harness_demo", stdout=out, stderr=err)
    assert NOTICE in err.getvalue()
    # One execution per prompt, and one on the second team's thread.
    assert Execution.objects.filter(status=ExecutionStatus.QUEUED).count() == len(harness_demo.PROMPTS) + 1
