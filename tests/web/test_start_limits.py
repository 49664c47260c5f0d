"""Starts per minute: a user (pages and AG-UI) and an API token may start only so many executions in a minute
(HARNESS_STARTS_PER_MINUTE, HARNESS_TOKEN_STARTS_PER_MINUTE); the next one is refused and nothing is created or
queued."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from runs.models import Execution, StartSubmission, Thread
from runs.services.store import StartLimited, start_limits
from tests.support import factories

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def one_minute(monkeypatch) -> None:
    """The window stays the same minute for the whole test: a test that crossed into the next minute would find it
    empty and see a start allowed."""
    held = start_limits.clock()
    monkeypatch.setattr(start_limits, "clock", lambda: held)


def _new_thread(client, profile, key: str):
    return client.post(
        reverse("runs:create_thread"),
        {"submission_key": key, "profile": profile.pk, "title": f"limited {key}", "input": "hello"},
    )


def test_a_start_past_the_users_limit_is_a_form_error_and_creates_nothing(client, settings, django_user_model):
    settings.HARNESS_STARTS_PER_MINUTE = 2
    user = django_user_model.objects.create_user("busy", password="pw-busy-123")
    profile = factories.profile()
    client.force_login(user)
    assert [_new_thread(client, profile, key).status_code for key in ("k-1", "k-2")] == [302, 302]
    # A repeat of a form already posted is not a new start: it is answered with what the first post created.
    assert _new_thread(client, profile, "k-2").status_code == 302
    before = (Thread.objects.count(), Execution.objects.count(), StartSubmission.objects.count())

    refused = _new_thread(client, profile, "k-3")

    assert refused.status_code == 429
    assert 0 < int(refused["Retry-After"]) <= 60
    assert "has started 2 executions in this minute" in refused.content.decode()
    assert (Thread.objects.count(), Execution.objects.count(), StartSubmission.objects.count()) == before
    # A start on an existing thread counts the same.
    thread = Thread.objects.first()
    Execution.objects.filter(thread=thread).update(status="completed")
    again = client.post(reverse("runs:start_execution", args=[thread.pk]), {"submission_key": "k-4", "input": "more"})
    assert again.status_code == 429 and Execution.objects.count() == before[1]


def test_a_thread_without_input_starts_nothing_and_is_not_counted(client, settings, django_user_model):
    settings.HARNESS_STARTS_PER_MINUTE = 1
    client.force_login(django_user_model.objects.create_user("quiet", password="pw-quiet-123"))
    profile = factories.profile()
    for key in ("k-1", "k-2"):
        posted = client.post(
            reverse("runs:create_thread"), {"submission_key": key, "profile": profile.pk, "title": key}
        )
        assert posted.status_code == 302
    assert _new_thread(client, profile, "k-3").status_code == 302


def _run_input(thread_id: str) -> str:
    message = {"id": "u1", "role": "user", "content": "hello"}
    return json.dumps(
        {"threadId": thread_id, "runId": "r1", "state": {}, "messages": [message], "tools": [], "context": []}
    )


# The endpoint closes its thread's database connections: on a transactional database.
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("full", ["user", "token"])
def test_agui_answers_a_start_past_a_limit_with_429_and_starts_nothing(client, settings, django_user_model, full):
    settings.HARNESS_STARTS_PER_MINUTE = 5 if full == "user" else 0
    settings.HARNESS_TOKEN_STARTS_PER_MINUTE = 5 if full == "token" else 0
    user = django_user_model.objects.create_user("agent-client", password="pw-agent-123")
    profile = factories.demo_profile()
    secret = factories.token_for(user)
    token = user.api_tokens.get()
    # The window is full: the user's through the pages, or this token's.
    for _ in range(5):
        start_limits.count_start(user.pk, token_pk=token.pk if full == "token" else None)

    response = client.post(
        reverse("agui:run", args=[profile.name]),
        _run_input("limited_1"),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {secret}",
    )

    body = json.loads(response.content)
    assert response.status_code == 429, body
    assert body["error"] == "too_many_starts"
    assert f"This {'user' if full == 'user' else 'API token'} has started 5 executions" in body["message"]
    assert response["Retry-After"] == str(body["details"][0]["retryAfter"])
    assert not Thread.objects.filter(thread_id="limited_1").exists() and not Execution.objects.exists()


def test_the_window_is_fixed_to_the_minute_and_zero_is_no_limit(settings, monkeypatch):
    settings.HARNESS_STARTS_PER_MINUTE = 1
    now = [1_000_040.0]
    monkeypatch.setattr(start_limits, "clock", lambda: now[0])
    # The cache reads the same clock: its keys expire by it.
    monkeypatch.setattr(start_limits.time, "time", lambda: now[0])
    start_limits.count_start(7)
    now[0] += 10
    with pytest.raises(StartLimited) as refused:
        start_limits.count_start(7)
    assert refused.value.retry_after == 30
    # The next minute opens a new window.
    now[0] += 30
    start_limits.count_start(7)
    settings.HARNESS_STARTS_PER_MINUTE = 0
    for _ in range(100):
        start_limits.count_start(7)
