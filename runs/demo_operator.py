"""The demo operator `operator` / `operator`: created for a local install so it can log in at once, never in
production, and never changed once it exists (someone may have demoted it or given it a real password)."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db import connection

from runs.models import DEFAULT_TEAM, Membership, Team, TeamRole

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
        # The admin of the team `default`, so it keeps its rights there without the superuser flag as well.
        Membership.objects.get_or_create(
            user=user, team=Team.objects.get_or_create(name=DEFAULT_TEAM)[0], defaults={"role": TeamRole.ADMIN}
        )
        return f"Created the demo operator '{DEMO_USERNAME}' with password '{DEMO_PASSWORD}' (local use only)."
    if user.check_password(DEMO_PASSWORD):
        return f"The demo operator '{DEMO_USERNAME}' exists with password '{DEMO_PASSWORD}' (left as it is)."
    return f"The account '{DEMO_USERNAME}' exists and its password was changed (left as it is)."


def demo_password_works() -> bool:
    """Whether the demo operator can still log in with its published password (production refuses to start then).

    A database not migrated yet has no accounts, so none can have the password.
    """
    users = get_user_model()
    if users._meta.db_table not in connection.introspection.table_names():
        return False
    user = users.objects.filter(username=DEMO_USERNAME, is_active=True).first()
    return user is not None and user.check_password(DEMO_PASSWORD)
