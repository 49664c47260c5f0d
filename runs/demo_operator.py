"""The demo operator `operator` / `operator`: created for a local install so it can log in at once, never in
production, and never changed once it exists (someone may have demoted it or given it a real password)."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.exceptions import ImproperlyConfigured

DEMO_USERNAME = "operator"
DEMO_PASSWORD = "operator"


def ensure_demo_operator() -> str:
    """Create the demo operator if there is no account of that name; say what there is."""
    user, created = get_user_model().objects.get_or_create(
        username=DEMO_USERNAME, defaults={"is_staff": True, "is_superuser": True}
    )
    if created:
        # set_password runs no validators: the demo password fails all but the length rule, and that is the point
        # of a published local-only password (production refuses to start while it works).
        user.set_password(DEMO_PASSWORD)
        user.save(update_fields=["password"])
        # Granted explicitly too, so the account still decides if someone takes away its superuser flag.
        user.user_permissions.add(
            *Permission.objects.filter(content_type__app_label="runs", codename="decide_deferred")
        )
        return f"Created the demo operator '{DEMO_USERNAME}' with password '{DEMO_PASSWORD}' (local use only)."
    if user.check_password(DEMO_PASSWORD):
        return f"The demo operator '{DEMO_USERNAME}' exists with password '{DEMO_PASSWORD}' (left as it is)."
    return f"The account '{DEMO_USERNAME}' exists and its password was changed (left as it is)."


def refuse_demo_password() -> None:
    """Production refuses to start while the demo operator can log in with its published password."""
    user = get_user_model().objects.filter(username=DEMO_USERNAME, is_active=True).first()
    if user is not None and user.check_password(DEMO_PASSWORD):
        raise ImproperlyConfigured(
            f"HARNESS_ENV=production: the account '{DEMO_USERNAME}' still has the demo password. Change it "
            f"(manage.py changepassword {DEMO_USERNAME}) or deactivate it before starting."
        )
