"""Passwords set through admin or a command pass Django's four standard validators; the local demo operator's
published password is the one deliberate exception, and still logs in."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.forms import SetPasswordForm
from django.core.management import call_command
from django.urls import reverse

from runs.demo_operator import DEMO_PASSWORD, DEMO_USERNAME

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("password", "refusal"),
    [
        ("kowalski-anna", "too similar to the username"),
        ("x7#kq", "too short"),
        ("password123", "too common"),
        ("4058392017466", "entirely numeric"),
    ],
)
def test_a_weak_password_is_refused_saying_why(django_user_model, password, refusal):
    user = django_user_model.objects.create_user("anna.kowalski", first_name="Anna", last_name="Kowalski")
    form = SetPasswordForm(user, {"new_password1": password, "new_password2": password})
    assert not form.is_valid()
    assert any(refusal in error for error in form.errors["new_password2"]), form.errors
    user.refresh_from_db()
    assert not user.has_usable_password()


def test_a_strong_password_is_accepted(django_user_model):
    user = django_user_model.objects.create_user("anna.kowalski")
    form = SetPasswordForm(user, {"new_password1": "plum-harbour-71-cask", "new_password2": "plum-harbour-71-cask"})
    assert form.is_valid(), form.errors


def test_the_local_demo_operator_gets_its_published_password_past_the_validators(client):
    call_command("ensure_demo_operator")
    operator = get_user_model().objects.get(username=DEMO_USERNAME)
    refused = SetPasswordForm(operator, {"new_password1": DEMO_PASSWORD, "new_password2": DEMO_PASSWORD})
    assert not refused.is_valid()

    response = client.post(reverse("login"), {"username": DEMO_USERNAME, "password": DEMO_PASSWORD})
    assert response.status_code == 302 and "_auth_user_id" in client.session
