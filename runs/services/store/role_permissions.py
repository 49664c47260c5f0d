"""Team roles as Django permissions, so `user.has_perm` and the admin answer as `access` does.

With an object of a team (`user.has_perm("runs.decide_deferred", execution)`) a member has the permissions of their
role in that object's team (`ROLE_PERMISSIONS`, each role with those of the roles below it). Without an object, a
team admin has the admin-site permissions on profiles, policies and their records (which rows they then see is
the admin's queryset scoping); no other permission is given without an object, since a global
`runs.decide_deferred` would make its holder an approver in every team they belong to.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.backends import BaseBackend
from django.db.models import Model

from runs.models import Team, TeamRole

from . import access

__all__ = ("ROLE_PERMISSIONS", "TeamRoleBackend")

TEAM_ADMIN_PERMISSIONS = frozenset(
    {
        "runs.view_agentprofile",
        "runs.add_agentprofile",
        "runs.change_agentprofile",
        "runs.delete_agentprofile",
        "runs.view_hostpolicy",
        "runs.add_hostpolicy",
        "runs.change_hostpolicy",
        "runs.view_hostpolicyversion",
        "runs.view_decision",
        "runs.view_deferredrequest",
        # Holds: the thread and execution lists in the admin offer only "put on hold" and "release".
        "runs.view_thread",
        "runs.change_thread",
        "runs.view_execution",
        "runs.change_execution",
        "runs.view_executiontombstone",
    }
)

# What each role adds to the ones below it, on its team's objects.
ROLE_PERMISSIONS: dict[TeamRole, frozenset[str]] = {
    TeamRole.VIEWER: frozenset({"runs.view_thread", "runs.view_execution", "runs.view_agentprofile"}),
    TeamRole.OPERATOR: frozenset({"runs.add_thread", "runs.add_execution"}),
    TeamRole.APPROVER: frozenset({access.DECIDE_PERMISSION}),
    TeamRole.ADMIN: TEAM_ADMIN_PERMISSIONS,
}


def permissions_of(role: TeamRole | None) -> set[str]:
    """Every permission `role` has on its team's objects (none for a non-member)."""
    if role is None:
        return set()
    return {
        permission for granted, permissions in ROLE_PERMISSIONS.items() if granted <= role for permission in permissions
    }


class TeamRoleBackend(BaseBackend):
    """An authentication backend that authenticates nobody: it only answers permissions from team memberships."""

    def get_all_permissions(self, user_obj: Any, obj: Model | None = None) -> set[str]:
        if not (user_obj.is_active and user_obj.is_authenticated):
            return set()
        if obj is None:
            # Cached on the user object for its request, as Django's ModelBackend caches its own.
            if not hasattr(user_obj, "_team_admin_perm_cache"):
                administers = access.scoped(Team.objects.all(), user_obj, TeamRole.ADMIN).exists()
                user_obj._team_admin_perm_cache = set(TEAM_ADMIN_PERMISSIONS) if administers else set()
            return set(user_obj._team_admin_perm_cache)
        if not access.is_scoped(obj):
            return set()
        return permissions_of(access.role_in(user_obj, access.team_of(obj)))

    def has_module_perms(self, user_obj: Any, app_label: str) -> bool:
        return any(permission.startswith(f"{app_label}.") for permission in self.get_all_permissions(user_obj))
