"""API tokens in the admin: issued for oneself (by a superuser, for anyone), the secret shown once on the page that
answers the form and kept nowhere else, a scope and an expiry, revoked only by those who may change tokens."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.apps import apps
from django.contrib import admin
from django.contrib.auth.models import Permission
from django.contrib.sessions.models import Session
from django.core.exceptions import PermissionDenied
from django.test import Client, RequestFactory
from django.utils import timezone

from agui_api import issuing
from agui_api.admin import ApiTokenAdmin
from agui_api.models import ApiToken, TokenScope, token_digest

pytestmark = pytest.mark.django_db

SECRET = re.compile(r"hh_[A-Za-z0-9_-]{40,}")
ADD = "/admin/agui_api/apitoken/add/"
LIST = "/admin/agui_api/apitoken/"


def staff(django_user_model, username: str, *codenames: str):
    user = django_user_model.objects.create_user(username, password=f"{username}-password-1", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="agui_api", codename__in=codenames))
    return user


def client_of(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def add_form(user, *, scope: str = "read", expires_in: timedelta = timedelta(days=30)) -> dict[str, object]:
    expires = timezone.now() + expires_in
    return {
        "user": user.pk,
        "name": "CopilotKit app",
        "scope": scope,
        "expires_at_0": f"{expires:%Y-%m-%d}",
        "expires_at_1": f"{expires:%H:%M:%S}",
    }


def test_the_secret_is_shown_once_on_the_answering_page_and_kept_nowhere(admin_client, django_user_model):
    owner = django_user_model.objects.create_user("client-owner")
    response = admin_client.post(ADD, add_form(owner, scope="read+decide"))

    # The answer to the form is the page with the secret (no redirect to a page that reads it from somewhere).
    assert response.status_code == 200
    (secret,) = set(SECRET.findall(response.content.decode()))
    token = ApiToken.objects.get()
    assert (token.user, token.digest, token.hint) == (owner, token_digest(secret), secret[:10])
    assert token.scope == "read+decide"
    # Not in the signed messages cookie, nor in any stored session.
    assert all(secret not in morsel.value for morsel in response.cookies.values())
    assert all(secret not in str(session.get_decoded()) for session in Session.objects.all())
    listing = admin_client.get(LIST).content.decode()
    detail = admin_client.get(f"{LIST}{token.pk}/change/").content.decode()
    assert secret not in listing and secret not in detail


def test_staff_issue_tokens_only_for_themselves(django_user_model):
    boss = django_user_model.objects.create_superuser("boss", password="boss-password-1")
    clerk = staff(django_user_model, "clerk", "add_apitoken")
    client = client_of(clerk)

    form = client.get(ADD).context["adminform"].form
    assert list(form.fields["user"].queryset) == [clerk] and form.fields["user"].initial == clerk.pk
    refused = client.post(ADD, add_form(boss))
    assert refused.status_code == 200 and "Select a valid choice" in refused.content.decode()
    assert not ApiToken.objects.exists() and not SECRET.search(refused.content.decode())

    issued = client.post(ADD, add_form(clerk))
    assert SECRET.search(issued.content.decode())
    assert ApiToken.objects.get().user == clerk


def test_issuing_for_another_user_is_refused_where_the_token_is_saved(django_user_model):
    boss = django_user_model.objects.create_superuser("boss", password="boss-password-1")
    clerk = staff(django_user_model, "clerk", "add_apitoken")
    request = RequestFactory().post(ADD)
    request.user = clerk

    # Past any form: the admin's save and the service both refuse.
    with pytest.raises(PermissionDenied):
        ApiTokenAdmin(ApiToken, admin.site).save_model(request, ApiToken(user=boss, name="sneaky"), None, False)
    with pytest.raises(PermissionDenied):
        issuing.issue(ApiToken(user=boss, name="sneaky"), issuer=clerk)
    assert not ApiToken.objects.exists()

    issuing.issue(ApiToken(user=clerk, name="by a superuser"), issuer=boss)
    issuing.issue(ApiToken(user=boss, name="at the command line"), issuer=None)
    assert ApiToken.objects.count() == 2


def test_every_admin_action_declares_its_permissions():
    site_actions = [name for name, _ in admin.site.actions]
    checked = []
    for model in apps.get_models():
        if not admin.site.is_registered(model):
            continue
        model_admin = admin.site.get_model_admin(model)
        for name in [*site_actions, *(model_admin.actions or [])]:
            function, action_name, _ = model_admin.get_action(name)
            assert getattr(function, "allowed_permissions", None), f"{model_admin}: action {action_name}"
            checked.append(action_name)
    assert "revoke" in checked


def test_only_staff_who_may_change_tokens_revoke_them(django_user_model):
    owner = django_user_model.objects.create_user("owner")
    token = ApiToken(user=owner, name="kept")
    token.issue()
    token.save()
    revoke = {"action": "revoke", "_selected_action": [token.pk]}

    viewer = client_of(staff(django_user_model, "viewer", "view_apitoken"))
    assert viewer.get(LIST).status_code == 200
    viewer.post(LIST, revoke)
    token.refresh_from_db()
    assert token.revoked_at is None

    changer = client_of(staff(django_user_model, "changer", "view_apitoken", "change_apitoken"))
    revoked = changer.post(LIST, revoke, follow=True)
    assert "Revoked 1 token." in revoked.content.decode()
    token.refresh_from_db()
    assert token.revoked_at is not None and not ApiToken.objects.active().exists()


def test_tokens_expire_after_the_configured_days_and_the_admin_shows_scope_and_expiry(
    admin_client, django_user_model, settings
):
    settings.HARNESS_API_TOKEN_DAYS = 30
    owner = django_user_model.objects.create_user("owner")
    fresh = ApiToken(user=owner, name="fresh")
    fresh.issue()
    fresh.save()
    assert timedelta(days=29) < fresh.expires_at - timezone.now() <= timedelta(days=30)
    assert fresh.scope == TokenScope.READ
    old = ApiToken(user=owner, name="old", scope=TokenScope.READ_DECIDE, expires_at=timezone.now() - timedelta(days=1))
    old.issue()
    old.save()
    assert list(ApiToken.objects.usable()) == [fresh]

    listing = admin_client.get(LIST).content.decode()
    assert f"{fresh.expires_at:%Y-%m-%d %H:%M:%S}" in listing and f"{old.expires_at:%Y-%m-%d %H:%M:%S}" in listing
    assert ">active<" in listing and ">expired<" in listing
    assert "read: watch event streams" in listing
    assert "read+decide: also start runs and answer or resume interrupts" in listing
    detail = admin_client.get(f"{LIST}{old.pk}/change/").content.decode()
    assert f"{old.expires_at:%Y-%m-%d %H:%M:%S}" in detail and "read+decide: also start runs" in detail

    add_page = admin_client.get(ADD).content.decode()
    assert f"{timezone.now() + timedelta(days=30):%Y-%m-%d}" in add_page


def test_a_new_tokens_expiry_must_be_ahead_and_within_ten_years(admin_client, admin_user):
    past = admin_client.post(ADD, add_form(admin_user, expires_in=timedelta(hours=-1)))
    assert "The expiry must be in the future." in past.content.decode()
    far = admin_client.post(ADD, add_form(admin_user, expires_in=timedelta(days=3651)))
    assert "The expiry may be at most 3650 days ahead." in far.content.decode()
    assert not ApiToken.objects.exists()
