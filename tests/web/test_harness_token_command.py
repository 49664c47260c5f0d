"""`manage.py harness_token`: issue a token (its secret printed once, alone on stdout), list and revoke tokens."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from agui_api.models import ApiToken, token_digest

pytestmark = pytest.mark.django_db


def run(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("harness_token", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_issue_list_and_revoke(django_user_model, settings):
    django_user_model.objects.create_user("alice")
    out, err = run("issue", "alice", "--name", "CopilotKit app", "--scope", "read+decide", "--days", "7")
    secret = out.strip()
    token = ApiToken.objects.get(digest=token_digest(secret))
    assert (token.user.username, token.name, token.scope) == ("alice", "CopilotKit app", "read+decide")
    assert timedelta(days=6, hours=23) < token.expires_at - timezone.now() <= timedelta(days=7)
    assert secret not in err
    assert f"token {token.pk} 'CopilotKit app' for alice: scope read+decide, every team of the user" in err

    settings.HARNESS_API_TOKEN_DAYS = 30
    out, _ = run("issue", "alice", "--name", "dashboard")
    default = ApiToken.objects.get(digest=token_digest(out.strip()))
    assert default.scope == "read" and timedelta(days=29) < default.expires_at - timezone.now() <= timedelta(days=30)

    listing, _ = run("list", "--user", "alice")
    assert secret not in listing and out.strip() not in listing
    assert f"{token.pk}\talice\tCopilotKit app\t{token.hint}…\tread+decide\t*\tactive\t" in listing

    revoked, _ = run("revoke", str(token.pk))
    assert revoked.strip() == f"token {token.pk} 'CopilotKit app' of alice: revoked"
    token.refresh_from_db()
    assert token.revoked_at is not None and list(ApiToken.objects.usable()) == [default]
    assert f"{token.pk}\talice\tCopilotKit app\t{token.hint}…\tread+decide\t*\trevoked\t" in run("list")[0]


def test_bad_requests_are_refused_and_issue_nothing(django_user_model):
    django_user_model.objects.create_user("alice")
    django_user_model.objects.create_user("gone", is_active=False)
    refusals = {
        ("issue", "nobody", "--name", "x"): "There is no user 'nobody'.",
        ("issue", "gone", "--name", "x"): "User 'gone' is inactive",
        ("issue", "alice", "--name", "x", "--days", "0"): "--days must be from 1 to 3650, not 0.",
        ("issue", "alice", "--name", "x", "--days", "3651"): "--days must be from 1 to 3650, not 3651.",
        ("issue", "alice", "--name", " "): "--name must be 1 to 100 characters.",
        ("revoke", "999"): "No API token with id 999; nothing was revoked.",
    }
    for args, message in refusals.items():
        with pytest.raises(CommandError, match=message):
            run(*args)
    with pytest.raises(CommandError, match="invalid choice: 'admin'"):
        run("issue", "alice", "--name", "x", "--scope", "admin")
    assert not ApiToken.objects.exists()
