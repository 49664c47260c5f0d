"""API tokens in the admin: the secret is shown once at creation, only its hash is kept, and revoking works."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model

from agui_api.models import ApiToken, token_digest

pytestmark = pytest.mark.django_db


def test_a_token_is_shown_once_stored_hashed_and_revocable(admin_client):
    owner = get_user_model().objects.create_user("client-owner")
    response = admin_client.post(
        "/admin/agui_api/apitoken/add/", {"user": owner.pk, "name": "CopilotKit app"}, follow=True
    )
    (secret,) = re.findall(r"hh_[A-Za-z0-9_-]{40,}", response.content.decode())
    token = ApiToken.objects.get()
    assert (token.user, token.digest, token.hint) == (owner, token_digest(secret), secret[:10])
    listing = admin_client.get("/admin/agui_api/apitoken/").content.decode()
    detail = admin_client.get(f"/admin/agui_api/apitoken/{token.pk}/change/").content.decode()
    assert secret not in listing and secret not in detail

    revoked = admin_client.post(
        "/admin/agui_api/apitoken/", {"action": "revoke", "_selected_action": [token.pk]}, follow=True
    )
    assert "Revoked 1 token." in revoked.content.decode()
    token.refresh_from_db()
    assert token.revoked_at is not None and not ApiToken.objects.active().exists()
