"""The `harness` system checks: environment values that did not parse (harness_site/environment.py), the ranges
of the Host's settings, wherever their values came from, the plug-ins they name (tool sets, demo model), and in
production the demo operator's published password.

Every process meets them before it starts: `manage.py` commands run them (the RQ worker and the sweeper among
them), `bin/run` runs `manage.py check` before supervisord starts anything (so a refusal stops there instead of
supervisord restarting a web process that refuses, forever), and harness_site/asgi.py calls `refuse_bad_settings`
for daphne, which runs no command.
"""

from __future__ import annotations

import math
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Critical, Error, run_checks
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError
from django.utils.module_loading import import_string

from harness_site.proxied_clients import trusted_networks
from runs.demo_operator import DEMO_USERNAME, demo_password_works

TAG = "harness"
HINT = "Each setting is read from the environment variable of the same name; docs/configuration.md lists them."


class Whole:
    def __init__(self, minimum: int, maximum: int | None = None) -> None:
        self.minimum, self.maximum = minimum, maximum
        self.words = (
            f"a whole number from {minimum} to {maximum}" if maximum else f"a whole number of at least {minimum}"
        )

    def __call__(self, value: Any) -> bool:
        return type(value) is int and value >= self.minimum and (self.maximum is None or value <= self.maximum)


class Seconds:
    def __init__(self, *, zero_allowed: bool = False) -> None:
        self.zero_allowed = zero_allowed
        self.words = f"a number of seconds {'of at least' if zero_allowed else 'above'} 0"

    def __call__(self, value: Any) -> bool:
        # An interval of infinity or NaN would stop the loop or the clock it drives.
        return (
            type(value) in (int, float) and math.isfinite(value) and (value > 0 or (self.zero_allowed and value == 0))
        )


class Flag:
    words = "True or False"

    def __call__(self, value: Any) -> bool:
        return type(value) is bool


class Addresses:
    words = "a list of IP addresses or networks (e.g. 10.0.1.5,10.0.1.0/24)"

    def __call__(self, value: Any) -> bool:
        try:
            return isinstance(value, list) and bool(trusted_networks(value))
        except (TypeError, ValueError):
            return False


PORT = Whole(1, 65535)
# Ten years: a token meant to last longer is one nobody rotates.
MAX_TOKEN_DAYS = 3650
RULES: dict[str, Whole | Seconds | Flag | Addresses] = {
    "DEBUG": Flag(),
    "HARNESS_BEHIND_TLS_PROXY": Flag(),
    "HARNESS_TRUSTED_PROXIES": Addresses(),
    "HARNESS_LOGIN_FAILURE_LIMIT": Whole(1),
    "HARNESS_LOGIN_LOCKOUT_MINUTES": Whole(1),
    "HARNESS_SOCKET_SESSION_CHECK_SECONDS": Seconds(),
    "HARNESS_SOCKET_REFRESH_SECONDS": Seconds(),
    "HARNESS_HEALTH_SWEEPER_STALE_SECONDS": Seconds(),
    "HARNESS_HEALTH_QUEUE_LIMIT": Whole(0),
    "HARNESS_BULK_MAX_ITEMS": Whole(1),
    "HARNESS_RECOVERY_BACKOFF_SECONDS": Seconds(zero_allowed=True),
    "HARNESS_RETENTION_CHUNK_SIZE": Whole(1, 100_000),
    "HARNESS_RETENTION_INTERVAL_SECONDS": Seconds(),
    "HARNESS_RETENTION_CHUNKS_PER_PASS": Whole(1),
    "HARNESS_RUNS_PER_WORKER": Whole(1),
    "HARNESS_WORKER_GRACE_SECONDS": Seconds(zero_allowed=True),
    "AGUI_MAX_BODY_BYTES": Whole(1),
    "HARNESS_API_TOKEN_DAYS": Whole(1, MAX_TOKEN_DAYS),
    "HARNESS_WEBHOOK_TIMEOUT_SECONDS": Seconds(),
    "HARNESS_WEBHOOK_ATTEMPTS": Whole(1, 20),
    "HARNESS_WEBHOOK_BACKOFF_SECONDS": Seconds(zero_allowed=True),
    "HARNESS_WEBHOOK_EXPIRING_MINUTES": Whole(1),
    "HARNESS_STARTS_PER_MINUTE": Whole(0),
    "HARNESS_TOKEN_STARTS_PER_MINUTE": Whole(0),
    "HARNESS_PORT": PORT,
    "REDIS_PORT": PORT,
    "HARNESS_WORKERS": Whole(1),
    "HARNESS_WEB": Whole(1),
}


def check_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    errors: list[CheckMessage] = [
        Error(problem, hint=HINT, id="runs.E001") for problem in settings.HARNESS_ENVIRONMENT_PROBLEMS
    ]
    for name, valid in RULES.items():
        value = getattr(settings, name)
        if not valid(value):
            errors.append(Error(f"{name} = {value!r}: it must be {valid.words}.", hint=HINT, id="runs.E002"))
    errors += [Error(problem, hint=PLUGIN_HINT, id="runs.E003") for problem in _plugin_problems()]
    return errors


PLUGIN_HINT = 'docs/models-and-tools.md "Your own tools" shows what the plug-in settings name.'


def _plugin_problems() -> list[str]:
    """What is wrong with the tool sets and the demo model the settings name (the worker would fail on it)."""
    from runs.services.store import toolbox

    problems = []
    try:
        toolbox.registry()
    except ImproperlyConfigured as exc:
        problems.append(str(exc))
    try:
        import_string(settings.HARNESS_DEMO_MODEL)
    except ImportError as exc:
        problems.append(f"HARNESS_DEMO_MODEL names {settings.HARNESS_DEMO_MODEL!r}, which cannot be imported: {exc}")
    return problems


def check_demo_password(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """In production, refuse to start while the demo operator can log in with the password the README prints."""
    if not settings.PRODUCTION:
        return []
    try:
        works = demo_password_works()
    except DatabaseError as exc:
        # Unknown is not safe: a process that cannot read the accounts could not serve them either.
        return [
            Critical(
                f"HARNESS_ENV=production: cannot read the accounts to check the demo password: {exc}", id="runs.E005"
            )
        ]
    if not works:
        return []
    return [
        Critical(
            f"HARNESS_ENV=production: the account '{DEMO_USERNAME}' still has the demo password.",
            hint=f"Change it (manage.py changepassword {DEMO_USERNAME}) or deactivate it before starting.",
            id="runs.E004",
        )
    ]


def refuse_bad_settings() -> None:
    """Raise ImproperlyConfigured listing every problem the `harness` checks find."""
    if errors := [message for message in run_checks(tags=[TAG]) if message.is_serious()]:
        raise ImproperlyConfigured("\n".join(str(error) for error in errors))
