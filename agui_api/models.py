"""Per-user API tokens for AG-UI clients that cannot use the session cookie.

Only a sha256 of the secret is stored; the secret itself is shown once, when the token is created in the
admin. A revoked token stays as a record of who had access, and can no longer authenticate.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Final

from django.conf import settings
from django.db import models
from django.utils import timezone

TOKEN_PREFIX: Final = "hh_"


def token_digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class ApiTokenQuerySet(models.QuerySet["ApiToken"]):
    def active(self) -> ApiTokenQuerySet:
        return self.filter(revoked_at=None, user__is_active=True)


class ApiToken(models.Model):
    """A bearer token of one user; `digest` is the sha256 of the secret, `hint` its first characters."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, help_text="What the token is for, e.g. the client that uses it.")
    digest = models.CharField(max_length=64, unique=True, editable=False)
    hint = models.CharField(max_length=12, editable=False, help_text="The first characters of the secret.")
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        verbose_name = "API token"
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.hint}…, {self.user})"

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
