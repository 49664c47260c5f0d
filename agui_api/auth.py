"""Who calls the endpoint: a bearer API token, or else the session of a logged-in user (same-origin pages).

A token may do what its scope says (`TokenScope`), in the one team it may be narrowed to (`Caller.within`); a session
may do whatever its user may. Either way the service behind a route checks the user's own roles too, so a token of a
user who left a team acts there no more. A stream that outlives the request asks
`still_valid` from time to time, so a revoked or expired token, or an ended session, stops it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

from django.contrib.auth.models import User
from django.db.models import Model, QuerySet
from django.http import HttpRequest, HttpResponse
from django.middleware.csrf import CsrfViewMiddleware
from django.utils import timezone

from runs.services.store import session_user_pk
from runs.services.store.access import within_team

from .errors import Refused
from .models import ApiToken, TokenScope, token_digest

__all__ = ("Caller", "authenticate", "csrf_refusal")

M = TypeVar("M", bound=Model)

BEARER = "bearer "
TOKEN_HELP = "Ask for a new one (the admin's API tokens, or manage.py harness_token)."


@dataclass(frozen=True)
class Caller:
    """An authenticated user, and the token (else the session) that proved it."""

    user: User
    token: ApiToken | None = None
    session_key: str | None = None

    @property
    def by_token(self) -> bool:
        return self.token is not None

    @property
    def team(self) -> int | None:
        """The one team the caller acts in (a narrowed token's), or None: every team of the user."""
        return self.token.team_id if self.token is not None else None

    def within(self, queryset: QuerySet[M]) -> QuerySet[M]:
        """The rows of `queryset` (already scoped to the user) the caller may reach: those of its team, if narrowed."""
        return within_team(queryset, self.team)

    def require(self, scope: TokenScope) -> None:
        """Raise `Refused` (403) unless the caller may act with `scope`."""
        if self.token is not None and not self.token.allows(scope):
            raise Refused(
                403,
                "insufficient_scope",
                f"This API token has scope {self.token.scope!r}: it may watch event streams, not start runs or "
                f"answer interrupts, which need scope {TokenScope.READ_DECIDE.value!r}. {TOKEN_HELP}",
            )

    def still_valid(self) -> bool:
        """Whether the token still authenticates (not revoked, not expired, its user active), or the session still
        authenticates the same user; reads the database."""
        if self.token is not None:
            return ApiToken.objects.usable().filter(pk=self.token.pk).exists()
        return self.session_key is not None and session_user_pk(self.session_key) == self.user.pk


async def authenticate(request: HttpRequest) -> Caller:
    """The caller; raises `Refused` (401) without one. A wrong, revoked or expired token is not silently replaced
    by the session."""
    header = request.headers.get("Authorization", "")
    if header[: len(BEARER)].lower() == BEARER:
        secret = header[len(BEARER) :].strip()
        token = await ApiToken.objects.active().select_related("user").filter(digest=token_digest(secret)).afirst()
        if token is None:
            raise Refused(401, "unauthenticated", f"The API token is unknown or revoked. {TOKEN_HELP}")
        if token.expired:
            expired = f"The API token expired at {token.expires_at.isoformat()}. {TOKEN_HELP}"
            raise Refused(401, "token_expired", expired)
        await ApiToken.objects.filter(pk=token.pk).aupdate(last_used_at=timezone.now())
        return Caller(token.user, token=token)
    user = await request.auser()
    if not user.is_authenticated:
        raise Refused(401, "unauthenticated", "Log in, or send 'Authorization: Bearer <API token>'.")
    return Caller(user, session_key=request.session.session_key)


def csrf_refusal(request: HttpRequest) -> HttpResponse | None:
    """Django's CSRF check for a cookie-authenticated call (a token cannot be sent by a foreign page)."""
    return CsrfViewMiddleware(_unreached_view).process_view(request, _unreached_view, (), {})


def _unreached_view(request: HttpRequest) -> HttpResponse:
    """The view the CSRF check is given: it only asks whether it is `csrf_exempt` (it is not)."""
    return HttpResponse()
