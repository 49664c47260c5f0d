"""Budget rules of a policy version (`HostPolicyVersion.budgets`): who they cover, their window and their limit.

A rule covers a profile (by name) or a user (a username, or `*` for each user on their own), for a UTC calendar day
or month, with a limit in tokens (input + output) or money (the price table's currency). What the window has spent
is counted in `runs.services.reports.budget_usage`; here are the rules and their windows only.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

__all__ = ("EACH_USER", "MAX_LIMIT", "BudgetRule", "parse_budgets", "window_bounds")

EACH_USER = "*"
# Far above any real budget; it keeps the numbers a form accepts within what every database stores exactly.
MAX_LIMIT = Decimal(10**12)


class BudgetRule(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    scope: Literal["profile", "user"]
    # No control characters: the name is matched against profile names and usernames, which have none.
    name: str = Field(min_length=1, max_length=150, pattern=r"^[^\x00-\x1f\x7f]+$")
    window: Literal["day", "month"]
    unit: Literal["tokens", "money"]
    limit: Decimal = Field(gt=0, le=MAX_LIMIT, decimal_places=4, allow_inf_nan=False)

    @model_validator(mode="after")
    def _whole_tokens(self) -> BudgetRule:
        if self.unit == "tokens" and self.limit != self.limit.to_integral_value():
            raise ValueError("a token limit is a whole number")
        if self.scope == "profile" and self.name == EACH_USER:
            raise ValueError(f"'{EACH_USER}' (each user) is for user budgets; a profile budget names its profile")
        return self

    def covers(self, *, profile: str, username: str | None) -> bool:
        if self.scope == "profile":
            return self.name == profile
        return username is not None and self.name in (EACH_USER, username)

    def label(self, username: str | None = None) -> str:
        who = f"user {username}" if self.scope == "user" and self.name == EACH_USER else f"{self.scope} {self.name}"
        return f"{who}, {self.limit.normalize():f} {self.unit} a {self.window}"


_RULES = TypeAdapter(tuple[BudgetRule, ...])


def parse_budgets(value: Any) -> tuple[BudgetRule, ...]:
    """Validate budget rules given as JSON (as the policy stores them); `ValueError` with a readable message."""
    try:
        json.dumps(value, allow_nan=False)
        return _RULES.validate_python(value or ())
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or 'budgets'}: {error['msg']}" for error in exc.errors()
        )
        raise ValueError(f"Invalid budgets: {problems}") from exc
    except (TypeError, ValueError) as exc:
        raise ValueError("Invalid budgets: they must be JSON with finite numbers.") from exc


def window_bounds(window: Literal["day", "month"], now: datetime) -> tuple[datetime, datetime]:
    """The UTC calendar day or month holding `now`: [start, end)."""
    utc = now.astimezone(UTC)
    if window == "day":
        start = utc.replace(hour=0, minute=0, second=0, microsecond=0)
        return start, start + timedelta(days=1)
    start = utc.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    end = start.replace(year=start.year + 1, month=1) if start.month == 12 else start.replace(month=start.month + 1)
    return start, end
