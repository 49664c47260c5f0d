"""What a budget's window has spent, and whether a run's next model request would go over one of its budgets.

Counted: the team's runs created in the window on the rule's profile (by the name frozen in the run) or started by
its user, plus what the asking run has spent so far (its own row records usage only when it ends). A money budget
counts the runs of known cost only: one of unknown cost is not guessed as 0, the verdict says how many were left out.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

from django.utils import timezone
from pydantic_ai.usage import RunUsage

from runs.harness import OverBudget
from runs.models import Run

from ..store.budget_rules import BudgetRule, parse_budgets, window_bounds
from .costs import RUN_FIELDS, PriceBook, Usage, usage_of

__all__ = ("first_spent_budget", "rules_of", "window_usage")


def rules_of(run: Run) -> list[BudgetRule]:
    """The budgets of the run's policy version that cover it (its profile, the execution's starter)."""
    starter = run.execution.created_by
    username = starter.get_username() if starter is not None else None
    profile = str(run.profile_snapshot.get("name", ""))
    version = run.policy_version
    rules = parse_budgets(version.budgets if version is not None else [])
    return [rule for rule in rules if rule.covers(profile=profile, username=username)]


def window_usage(rule: BudgetRule, run: Run, now: datetime, prices: PriceBook | None = None) -> Usage:
    """What the runs `rule` counts for `run` spent in the window holding `now` (finished runs' recorded usage)."""
    start, end = window_bounds(rule.window, now)
    runs = Run.objects.filter(
        execution__thread__team_id=run.execution.thread.team_id, created_at__gte=start, created_at__lt=end
    )
    if rule.scope == "profile":
        runs = runs.filter(profile_snapshot__name=rule.name)
    else:
        runs = runs.filter(execution__created_by_id=run.execution.created_by_id)
    return usage_of(runs, prices)


def _current(run: Run, usage: RunUsage, prices: PriceBook) -> Usage:
    row: dict[str, Any] = {field: None for field in RUN_FIELDS}
    row.update(
        usage={
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "cache_read_tokens": usage.cache_read_tokens,
            "cache_write_tokens": usage.cache_write_tokens,
        },
        status=run.status,
        created_at=run.created_at,
        profile_snapshot__model=run.profile_snapshot.get("model", ""),
    )
    return prices.usage(row)


def first_spent_budget(run: Run, usage: RunUsage, now: datetime | None = None) -> OverBudget | None:
    """The first budget of `run` its window has spent (`usage`: the run's own so far), or None."""
    rules = rules_of(run)
    if not rules:
        return None
    now = now or timezone.now()
    prices = PriceBook()
    own = _current(run, usage, prices)
    for rule in rules:
        spent = window_usage(rule, run, now, prices)
        spent.add(own)
        amount = Decimal(spent.tokens) if rule.unit == "tokens" else spent.known_cost
        text = str(spent.tokens) if rule.unit == "tokens" else f"{spent.known_cost:.4f}"
        if rule.unit == "money" and spent.unknown_runs:
            text += f" (not counted: {spent.unknown_runs} run(s) of unknown cost)"
        if amount >= rule.limit:
            username = run.execution.created_by.get_username() if run.execution.created_by else None
            return OverBudget(
                budget=rule.label(username), spent=text, limit=f"{rule.limit.normalize():f}", window=rule.window
            )
    return None
