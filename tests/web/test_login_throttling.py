"""Login throttling (django-axes): repeated wrong passwords lock that username from that address, with a message."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

pytestmark = pytest.mark.django_db


@pytest.fixture
def account(django_user_model):
    return django_user_model.objects.create_user("guarded", password="right-password-1")


def attempt(client: Client, password: str, *, username: str = "guarded", url: str | None = None):
    return client.post(url or reverse("login"), {"username": username, "password": password})


def logged_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


def test_after_the_failure_limit_even_the_right_password_is_refused_with_a_lockout_message(account, settings):
    client = Client(REMOTE_ADDR="203.0.113.7")
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert attempt(client, "wrong").status_code == 200
    assert attempt(client, "wrong").status_code == 429

    response = attempt(client, "right-password-1")

    assert response.status_code == 429
    assert b'id="lockout"' in response.content
    assert b"Too many failed logins" in response.content
    assert not logged_in(client)


def test_below_the_limit_the_right_password_works_and_clears_the_count(account, settings):
    client = Client(REMOTE_ADDR="203.0.113.8")
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        attempt(client, "wrong")
    assert attempt(client, "right-password-1").status_code == 302
    assert logged_in(client)

    client.logout()
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        attempt(client, "wrong")
    assert attempt(client, "right-password-1").status_code == 302


def test_a_lockout_holds_only_for_that_username_from_that_address(account, django_user_model, settings):
    django_user_model.objects.create_user("colleague", password="colleague-password-1")
    attacker = Client(REMOTE_ADDR="198.51.100.1")
    for _ in range(settings.AXES_FAILURE_LIMIT):
        attempt(attacker, "wrong")
    assert attempt(attacker, "right-password-1").status_code == 429

    assert attempt(attacker, "colleague-password-1", username="colleague").status_code == 302
    elsewhere = Client(REMOTE_ADDR="192.0.2.50")
    assert attempt(elsewhere, "right-password-1").status_code == 302


def test_the_admin_login_is_throttled_too(account, settings):
    client = Client(REMOTE_ADDR="203.0.113.9")
    url = reverse("admin:login")
    for _ in range(settings.AXES_FAILURE_LIMIT):
        attempt(client, "wrong", url=url)
    assert attempt(client, "right-password-1", url=url).status_code == 429
