"""What an AG-UI caller may do, and for how long: a token's scope and expiry are checked on every request, and an
open event stream ends soon after its token is revoked or expires, or its session logs out."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta

import httpx
import pytest
from django.utils import timezone

from agui_api.models import ApiToken, TokenScope, token_digest
from runs.models import Decision, DeferredRequest, Thread
from tests.support import factories
from tests.support.agui_http import PROFILE, TIMEOUT, bearer, parse, run_input

# Far above the stream's check interval (streams.CREDENTIAL_CHECK_SECONDS), for a loaded machine.
ENDS_WITHIN_SECONDS = 30.0


@pytest.mark.django_db
def test_a_read_token_may_neither_start_nor_resume_and_changes_nothing(client, django_user_model):
    factories.demo_profile()
    decider = factories.create_decider(django_user_model, "reader", "reader-password-1")
    reader = bearer(factories.token_for(decider, scope=TokenScope.READ))
    suspended = factories.suspended_execution()
    thread_id = suspended.execution.thread.thread_id
    approve = [{"interruptId": "call-pay", "status": "resolved", "payload": {"approved": True}}]

    for body in (run_input("agui_read_only", "r1", "hello"), run_input(thread_id, "r2", "pay acme", resume=approve)):
        refused = client.post(f"/agui/{PROFILE}/", body, content_type="application/json", headers=reader)
        assert refused.status_code == 403
        assert refused.json()["error"] == "insufficient_scope" and "read+decide" in refused.json()["message"]
        assert 'error="insufficient_scope"' in refused.headers["WWW-Authenticate"]
    assert not Thread.objects.filter(thread_id="agui_read_only").exists() and not Decision.objects.exists()
    assert set(DeferredRequest.objects.values_list("status", flat=True)) == {"pending"}


@pytest.mark.django_db
def test_an_expired_token_is_refused_with_a_401_that_says_so(client, django_user_model):
    factories.demo_profile()
    owner = django_user_model.objects.create_user("owner")
    secret = factories.token_for(owner)
    ApiToken.objects.filter(digest=token_digest(secret)).update(expires_at=timezone.now() - timedelta(seconds=1))

    body = run_input("agui_expired", "r1", "hi")
    started = client.post(f"/agui/{PROFILE}/", body, content_type="application/json", headers=bearer(secret))
    watched = client.get("/agui/executions/1/events", headers=bearer(secret))
    for refused in (started, watched):
        assert refused.status_code == 401 and refused.json()["error"] == "token_expired"
        assert "expired at" in refused.json()["message"] and refused.headers["WWW-Authenticate"].startswith("Bearer")
    assert not Thread.objects.filter(thread_id="agui_expired").exists()
    assert ApiToken.objects.get().last_used_at is None


def open_execution_url() -> str:
    """An execution that stays running (no worker has its run) and has a few events to replay."""
    execution = factories.make_execution()
    run = factories.make_run(execution)
    factories.append_events(run, factories.text_run_events(run, ["working", " on it"], finish=False))
    return f"/agui/executions/{execution.pk}/events"


def read_to_the_end(lines: Iterator[str], end_of: str) -> list[str]:
    """The rest of a stream's lines once `end_of` happened; fails if it is still open `ENDS_WITHIN_SECONDS` later
    (an open stream sends at least a keepalive every 15 s, so the check comes round)."""
    deadline = time.monotonic() + ENDS_WITHIN_SECONDS
    rest = []
    for line in lines:
        assert time.monotonic() < deadline, f"the stream is still open {ENDS_WITHIN_SECONDS:g} s after {end_of}"
        rest.append(line)
    return rest


@pytest.mark.parametrize("end", ["revoked", "expired"])
def test_a_tokens_open_stream_ends_when_the_token_is_revoked_or_expires(live_stack, operator_user, end):
    url = open_execution_url()
    secret = factories.token_for(operator_user, scope=TokenScope.READ)
    with (
        httpx.Client(base_url=live_stack.base_url, timeout=TIMEOUT) as http,
        http.stream("GET", url, headers=bearer(secret)) as response,
    ):
        assert response.status_code == 200
        lines = response.iter_lines()
        assert next(parse(lines)).event["type"] == "RUN_STARTED"
        token = ApiToken.objects.get(digest=token_digest(secret))
        if end == "revoked":
            token.revoke()
        else:
            ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now())
        rest = read_to_the_end(lines, f"the token was {end}")
    assert ": ended: the API token was revoked or has expired" in rest
    again = httpx.get(f"{live_stack.base_url}{url}", headers=bearer(secret), timeout=TIMEOUT)
    assert again.status_code == 401


def test_a_sessions_open_stream_ends_when_it_logs_out(live_stack, operator_user):
    url = open_execution_url()
    with httpx.Client(base_url=live_stack.base_url, timeout=TIMEOUT) as http:
        http.get("/login/")
        login = {"username": "op", "password": "op-password-1", "csrfmiddlewaretoken": http.cookies["csrftoken"]}
        assert http.post("/login/", data=login).status_code == 302
        with http.stream("GET", url) as response:
            assert response.status_code == 200
            lines = response.iter_lines()
            assert next(parse(lines)).event["type"] == "RUN_STARTED"
            logout = http.post("/logout/", data={"csrfmiddlewaretoken": http.cookies["csrftoken"]})
            assert logout.status_code == 302
            rest = read_to_the_end(lines, "logging out")
        assert ": ended: the login session ended" in rest
        assert http.get(url).status_code == 401
