"""Issue, list and revoke AG-UI API tokens from the command line (the admin's "API tokens" does the same)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from agui_api import issuing
from agui_api.models import NAME_MAX_LENGTH, ApiToken, TokenScope
from runs.checks import MAX_TOKEN_DAYS
from runs.models import Team
from runs.terminal_text import printable


class Command(BaseCommand):
    help = (
        "API tokens of the AG-UI endpoint. `issue USER --name NAME [--scope read|read+decide] [--team TEAM] "
        "[--days N]` prints "
        "the new secret alone on stdout (once: only its hash is kept) and what it is on stderr; `list [--user USER]`; "
        "`revoke ID...`."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        issue = actions.add_parser("issue", help="issue a token for a user and print its secret once")
        issue.add_argument("username")
        issue.add_argument("--name", required=True, help="what the token is for, e.g. the client that uses it")
        issue.add_argument(
            "--scope",
            choices=TokenScope.values,
            default=TokenScope.READ.value,
            help="read: watch event streams; read+decide: also start runs and answer interrupts (default: read)",
        )
        issue.add_argument(
            "--team", help="act only in this team of the user (default: in every team of the user)", metavar="TEAM"
        )
        issue.add_argument(
            "--days",
            type=int,
            default=settings.HARNESS_API_TOKEN_DAYS,
            help=f"days until it expires, 1 to {MAX_TOKEN_DAYS} (default: HARNESS_API_TOKEN_DAYS, "
            f"{settings.HARNESS_API_TOKEN_DAYS})",
        )
        listing = actions.add_parser("list", help="list tokens (never their secrets)")
        listing.add_argument("--user", help="only this user's tokens")
        revoke = actions.add_parser("revoke", help="revoke tokens by id (see `list`)")
        revoke.add_argument("ids", nargs="+", type=int, metavar="ID")

    def handle(self, *args: Any, action: str, **options: Any) -> None:
        if action == "issue":
            self._issue(options["username"], options["name"], options["scope"], options["days"], options["team"])
        elif action == "list":
            self._list(options["user"])
        else:
            self._revoke(options["ids"])

    def _issue(self, username: str, name: str, scope: str, days: int, team_name: str | None) -> None:
        if not 1 <= days <= MAX_TOKEN_DAYS:
            raise CommandError(f"--days must be from 1 to {MAX_TOKEN_DAYS}, not {days}.")
        if not name.strip() or len(name) > NAME_MAX_LENGTH:
            raise CommandError(f"--name must be 1 to {NAME_MAX_LENGTH} characters.")
        user = _user(username)
        if not user.is_active:
            raise CommandError(f"User {username!r} is inactive: a token of theirs would not authenticate.")
        team = None
        if team_name is not None:
            team = Team.objects.filter(name=team_name).first()
            if team is None:
                raise CommandError(f"There is no team {team_name!r}; nothing was issued.")
            if problem := issuing.team_problem(user, team):
                raise CommandError(f"{problem} Nothing was issued.")
        expires_at = timezone.now() + timedelta(days=days)
        token = ApiToken(user=user, name=name, scope=scope, team=team, expires_at=expires_at)
        secret = issuing.issue(token, issuer=None)
        expires = f"{token.expires_at:%Y-%m-%d %H:%M %Z}"
        self.stderr.write(
            f"Issued API token {token.pk} {name!r} for {username}: scope {scope}, "
            f"{f'team {team} only' if team else 'every team of the user'}, expires {expires}. Copy the secret "
            "now; it is not shown again. Send it as 'Authorization: Bearer <token>'."
        )
        self.stdout.write(secret)

    def _list(self, username: str | None) -> None:
        tokens = ApiToken.objects.select_related("user", "team").order_by("pk")
        if username is not None:
            tokens = tokens.filter(user=_user(username))
        self.stdout.write("id\tuser\tname\thint\tscope\tteam\tstate\texpires\tlast used")
        for token in tokens:
            state = "revoked" if token.revoked_at else "expired" if token.expired else "active"
            used = f"{token.last_used_at:%Y-%m-%d %H:%M}" if token.last_used_at else "never"
            self.stdout.write(
                f"{token.pk}\t{token.user}\t{printable(token.name)}\t{token.hint}…\t{token.scope}\t"
                f"{token.team or '*'}\t{state}\t{token.expires_at:%Y-%m-%d %H:%M}\t{used}"
            )

    def _revoke(self, ids: list[int]) -> None:
        tokens = {token.pk: token for token in ApiToken.objects.filter(pk__in=ids)}
        if unknown := [pk for pk in ids if pk not in tokens]:
            raise CommandError(f"No API token with id {', '.join(map(str, unknown))}; nothing was revoked.")
        for pk in ids:
            token = tokens[pk]
            already = token.revoked_at is not None
            token.revoke()
            self.stdout.write(f"token {pk} {token.name!r} of {token.user}: {'already ' if already else ''}revoked")


def _user(username: str) -> Any:
    model = get_user_model()
    user = model._default_manager.filter(**{model.USERNAME_FIELD: username}).first()
    if user is None:
        raise CommandError(f"There is no user {username!r}.")
    return user
