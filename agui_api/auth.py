"""Who calls the endpoint: a bearer API token, or else the session of a logged-in user (same-origin pages)."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.http import HttpRequest, HttpResponse
from django.middleware.csrf import CsrfViewMiddleware
from django.utils import timezone

from .models import ApiToken, token_digest

__all__ = ("Caller", "authenticate", "csrf_refusal")

BEARER = "bearer "


class Caller:
    """An authenticated user and whether a token (not the session cookie) proved it."""

    def __init__(self, user: AbstractBaseUser, *, by_token: bool) -> None:
        self.user = user
        self.by_token = by_token


async def authenticate(request: HttpRequest) -> Caller | None:
    """The caller, or None: a wrong or revoked token is not silently replaced by the session."""
    header = request.headers.get("Authorization", "")
    if header[: len(BEARER)].lower() == BEARER:
        secret = header[len(BEARER) :].strip()
        token = await ApiToken.objects.active().select_related("user").filter(digest=token_digest(secret)).afirst()
        if token is None:
            return None
        await ApiToken.objects.filter(pk=token.pk).aupdate(last_used_at=timezone.now())
        return Caller(token.user, by_token=True)
    user = await request.auser()
    return Caller(user, by_token=False) if user.is_authenticated else None


def csrf_refusal(request: HttpRequest) -> HttpResponse | None:
    """Django's CSRF check for a cookie-authenticated call (a token cannot be sent by a foreign page)."""
    return CsrfViewMiddleware(lambda _: HttpResponse()).process_view(request, None, (), {})
