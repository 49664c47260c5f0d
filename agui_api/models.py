"""Per-user API tokens for AG-UI clients that cannot use the session cookie.

Only a sha256 of the secret is stored; the secret itself is shown once, when the token is issued (`issuing.py`).
A token has a scope (what it may do at the endpoint), an expiry, and may be narrowed to one team of its user; a
revoked or expired token stays as a record of who had access, and can no longer authenticate.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timedelta
from typing import Final

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

TOKEN_PREFIX: Final = "hh_"


def token_digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def default_expiry() -> datetime:
    return timezone.now() + timedelta(days=settings.HARNESS_API_TOKEN_DAYS)


class TokenScope(models.TextChoices):
    """What a token may do; a session may do everything its user's permissions allow."""

    READ = "read", "read: watch event streams"
    READ_DECIDE = "read+decide", "read+decide: also start runs and answer or resume interrupts"


class ApiTokenQuerySet(models.QuerySet["ApiToken"]):
    def active(self) -> ApiTokenQuerySet:
        """Not revoked, of an active user; expired ones included (a caller is told that it expired)."""
        return self.filter(revoked_at=None, user__is_active=True)

    def usable(self) -> ApiTokenQuerySet:
        """The tokens that authenticate now."""
        return self.active().filter(expires_at__gt=timezone.now())


NAME_MAX_LENGTH = 100


class ApiToken(models.Model):
    """A bearer token of one user; `digest` is the sha256 of the secret, `hint` its first characters."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(
        max_length=NAME_MAX_LENGTH, help_text="What the token is for, e.g. the client that uses it."
    )
    scope = models.CharField(
        max_length=20,
        choices=TokenScope.choices,
        default=TokenScope.READ,
        help_text="read: GET /agui/executions/<pk>/events. read+decide: also POST /agui/<profile>/, which starts "
        "runs and answers interrupts (each still needs the user's role in the team: operator to start, approver to "
        "decide approvals).",
    )
    team = models.ForeignKey(
        "runs.Team",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="api_tokens",
        help_text="Empty: the token acts in every team of its user. A team: only there (and only while its user is "
        "a member).",
    )
    digest = models.CharField(max_length=64, unique=True, editable=False)
    hint = models.CharField(max_length=12, editable=False, help_text="The first characters of the secret.")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(
        default=default_expiry, help_text="After this the token no longer authenticates; issue a new one to rotate."
    )
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        verbose_name = "API token"
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(condition=Q(scope__in=TokenScope.values), name="api_token_scope_known"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.hint}…, {self.user})"

    @property
    def expired(self) -> bool:
        return self.expires_at <= timezone.now()

    def allows(self, scope: TokenScope) -> bool:
        return scope == TokenScope.READ or self.scope == TokenScope.READ_DECIDE

    def issue(self) -> str:
        """Give this unsaved token a new secret; returns the secret, which is not stored anywhere."""
        secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
        self.digest = token_digest(secret)
        self.hint = secret[:10]
        return secret

    def revoke(self) -> None:
        if self.revoked_at is None:
            self.revoked_at = timezone.now()
            self.save(update_fields=["revoked_at"])
