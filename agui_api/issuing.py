"""Issuing API tokens: who may issue one for whom, for how long; the admin and `manage.py harness_token` use it.

A token acts with every permission of its owner, so a user may issue tokens only for themselves; only a superuser
(who could act as anyone anyway) may issue one for another user. The check is here, where the token is saved,
not only in the admin's form.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.utils import timezone

from runs.checks import MAX_TOKEN_DAYS
from runs.models import Membership, Team

from .models import ApiToken

__all__ = ("expiry_problem", "issue", "team_problem")


def expiry_problem(expires_at: datetime) -> str | None:
    """Why a new token cannot expire at `expires_at`, or None."""
    now = timezone.now()
    if expires_at <= now:
        return "The expiry must be in the future."
    if expires_at > now + timedelta(days=MAX_TOKEN_DAYS):
        return f"The expiry may be at most {MAX_TOKEN_DAYS} days ahead."
    return None


def team_problem(user: User, team: Team | None) -> str | None:
    """Why a token of `user` cannot be narrowed to `team`, or None: it must be one of the user's teams."""
    if team is None or user.is_superuser or Membership.objects.filter(user=user, team=team).exists():
        return None
    return f"{user} is not a member of team {team}: a token acts only where its user may."


def issue(token: ApiToken, *, issuer: User | None) -> str:
    """Save the new, unsaved `token` with a fresh secret and return the secret, which is stored nowhere.

    `issuer` is the user asking; None is an operator at the command line, who has the database anyway.
    """
    if issuer is not None and not issuer.is_superuser and token.user_id != issuer.pk:
        raise PermissionDenied("Only a superuser may issue an API token for another user.")
    if problem := expiry_problem(token.expires_at):
        raise ValidationError({"expires_at": problem})
    if problem := team_problem(token.user, token.team):
        raise ValidationError({"team": problem})
    secret = token.issue()
    token.save()
    return secret
