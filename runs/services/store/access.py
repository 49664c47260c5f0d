"""Who may see and do what: the one place that decides, from team memberships.

Every thread (and with it its executions, runs, events, checkpoints and decisions), profile and policy belongs
to one team. A member's role in a team (`TeamRole`) allows an action there when it is at least the action's role
(`ACTION_ROLES`). A superuser sees and does everything. The `runs.decide_deferred` permission, how deciding was
granted before teams, makes a member an approver in each of their teams.

Reads go through `scoped` (or `visible_threads`, `visible_executions`, ...), so an object of another team is
simply not found: pages answer 404 and sockets `not_found`, exactly as for an object that does not exist.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, TypeVar

from django.contrib.auth import get_user_model
from django.contrib.auth import models as auth
from django.core.exceptions import ObjectDoesNotExist
from django.db.models import Model, QuerySet
from django.http import Http404

from runs.models import (
    AgentProfile,
    Checkpoint,
    Decision,
    DeferredRequest,
    DroppedCancelRequest,
    Execution,
    ExecutionTombstone,
    HostPolicy,
    HostPolicyVersion,
    Membership,
    Run,
    Team,
    TeamRole,
    Thread,
    TimelineEvent,
)

__all__ = (
    "ACTION_ROLES",
    "DECIDE_PERMISSION",
    "Action",
    "can",
    "get_visible_or_404",
    "is_scoped",
    "role_in",
    "scoped",
    "team_of",
    "visible_executions",
    "visible_profiles",
    "visible_threads",
    "visible_users",
    "within_team",
)

DECIDE_PERMISSION = "runs.decide_deferred"

M = TypeVar("M", bound=Model)
User = auth.User | auth.AnonymousUser


class Action(StrEnum):
    VIEW = "view"
    START = "start"
    FORK = "fork"
    CANCEL = "cancel"
    RECOVER = "recover"
    ANSWER = "answer"
    DECIDE = "decide"
    ADMINISTER = "administer"


ACTION_ROLES: dict[Action, TeamRole] = {
    Action.VIEW: TeamRole.VIEWER,
    Action.START: TeamRole.OPERATOR,
    Action.FORK: TeamRole.OPERATOR,
    Action.CANCEL: TeamRole.OPERATOR,
    # Starting a failed execution's recovery run: an operator's, like starting work.
    Action.RECOVER: TeamRole.OPERATOR,
    # Questions and external results; approvals are `DECIDE`.
    Action.ANSWER: TeamRole.OPERATOR,
    Action.DECIDE: TeamRole.APPROVER,
    Action.ADMINISTER: TeamRole.ADMIN,
}

# The path from each scoped model to its team.
_TEAM_PATHS: dict[type[Model], str] = {
    Team: "pk",
    AgentProfile: "team",
    HostPolicy: "team",
    HostPolicyVersion: "policy__team",
    Thread: "team",
    Checkpoint: "thread__team",
    Execution: "thread__team",
    Run: "execution__thread__team",
    TimelineEvent: "execution__thread__team",
    DeferredRequest: "execution__thread__team",
    Decision: "request__execution__thread__team",
    DroppedCancelRequest: "execution__thread__team",
    ExecutionTombstone: "execution__thread__team",
}


def _is_superuser(user: User) -> bool:
    return bool(user.is_authenticated and user.is_active and user.is_superuser)


def _raised(role: int, user: User) -> int:
    """The member's role, raised to approver by the global decide permission."""
    if role < TeamRole.APPROVER and user.has_perm(DECIDE_PERMISSION):
        return TeamRole.APPROVER
    return role


def _team_ids(user: User, minimum: TeamRole) -> QuerySet[Membership, Mapping[str, Any]]:
    """The pks of the teams where `user` has at least `minimum`, as a subquery."""
    if not (user.is_authenticated and user.is_active):
        return Membership.objects.none().values("team")
    memberships = Membership.objects.filter(user=user)
    if not (minimum <= TeamRole.APPROVER and user.has_perm(DECIDE_PERMISSION)):
        memberships = memberships.filter(role__gte=minimum)
    return memberships.values("team")


def scoped(queryset: QuerySet[M], user: User, minimum: TeamRole = TeamRole.VIEWER) -> QuerySet[M]:
    """The rows of `queryset` in teams where `user` has at least `minimum` (all of them for a superuser)."""
    if _is_superuser(user):
        return queryset
    return queryset.filter(**{f"{_TEAM_PATHS[queryset.model]}__in": _team_ids(user, minimum)})


def within_team(queryset: QuerySet[M], team: int | None) -> QuerySet[M]:
    """The rows of `queryset` in team `team` (all of them for None): what a credential narrowed to a team sees."""
    if team is None:
        return queryset
    return queryset.filter(**{_TEAM_PATHS[queryset.model]: team})


def visible_threads(user: User) -> QuerySet[Thread]:
    return scoped(Thread.objects.all(), user)


def visible_executions(user: User) -> QuerySet[Execution]:
    return scoped(Execution.objects.all(), user)


def visible_profiles(user: User, action: Action = Action.VIEW) -> QuerySet[AgentProfile]:
    """Profiles the user may see, or (with `Action.START`) start work on."""
    return scoped(AgentProfile.objects.all(), user, ACTION_ROLES[action])


def visible_users(user: User) -> QuerySet[Any]:
    """The users who share a team with `user` (every user for a superuser): whom the audit may name."""
    users = get_user_model().objects.all()
    if _is_superuser(user):
        return users
    return users.filter(team_memberships__team__in=_team_ids(user, TeamRole.VIEWER)).distinct()


def get_visible_or_404(queryset: QuerySet[M], user: User, **lookup: Any) -> M:
    """The one row of `queryset` matching `lookup` that `user` may see; 404 if none (absent or another team's)."""
    try:
        return scoped(queryset, user).get(**lookup)
    except ObjectDoesNotExist:
        raise Http404(f"No {queryset.model._meta.verbose_name} matches the given query.") from None


def is_scoped(obj: Model) -> bool:
    """Whether `obj` belongs to a team (its team decides who may see it)."""
    return type(obj) in _TEAM_PATHS


def team_of(obj: Model) -> int:
    """The pk of the team `obj` belongs to."""
    path = _TEAM_PATHS[type(obj)]
    if path == "pk":
        pk: int = obj.pk
        return pk
    team: int = type(obj)._default_manager.filter(pk=obj.pk).values_list(path, flat=True).get()
    return team


def role_in(user: User, team: Team | int) -> TeamRole | None:
    """The user's role in `team` (None: not a member); a superuser is an admin of every team."""
    if _is_superuser(user):
        return TeamRole.ADMIN
    if not (user.is_authenticated and user.is_active):
        return None
    team_pk = team if isinstance(team, int) else team.pk
    role = Membership.objects.filter(user=user, team_id=team_pk).values_list("role", flat=True).first()
    return None if role is None else TeamRole(_raised(role, user))


def can(user: User, action: Action, obj: Model) -> bool:
    """Whether `user` may do `action` on `obj` (or on anything of `obj`'s team)."""
    role = role_in(user, team_of(obj))
    return role is not None and role >= ACTION_ROLES[action]
