"""Tokens and cost of runs, and their sums by execution, thread, profile, user, model and day.

A run's cost is its tokens at the price of its model (the profile's, frozen in the run) valid when the run was
created: uncached input, output, cache reads and cache writes, each per million tokens. pydantic-ai counts cached
tokens inside `input_tokens`, so they are taken out of the input before it is priced. A run that spent tokens on a
model without a price, or that stopped before its usage was recorded (a dead worker, a host error), has an unknown
cost: a sum says how much is known and how many runs are not, and never counts them as 0.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from runs.models import ModelPrice, Run, RunStatus

__all__ = ("RUN_FIELDS", "PriceBook", "Row", "Usage", "day_of", "usage_by", "usage_of")

MILLION = Decimal(1_000_000)
# Finished without a usage record: what they spent is not known.
_UNRECORDED = frozenset({RunStatus.ABANDONED, RunStatus.FAILED})
# What a sum reads of each run (`values()`), so it never loads journals, outputs or whole profile snapshots.
RUN_FIELDS = (
    "usage",
    "status",
    "created_at",
    "profile_snapshot__model",
    "profile_snapshot__name",
    "execution__created_by__username",
)
Row = Mapping[str, Any]


@dataclass
class Usage:
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    known_cost: Decimal = field(default_factory=Decimal)
    unknown_runs: int = 0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def cost(self) -> Decimal | None:
        """The whole cost, or None when some run's cost is unknown."""
        return self.known_cost if not self.unknown_runs else None

    def __str__(self) -> str:
        known = f"{self.known_cost:.4f}"
        if not self.unknown_runs:
            return known
        runs = f"{self.unknown_runs} run{'s' if self.unknown_runs > 1 else ''}"
        return f"unknown ({runs} without a price)" if not self.known_cost else f"{known} + unknown ({runs})"

    def add(self, other: Usage) -> None:
        self.requests += other.requests
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cache_read_tokens += other.cache_read_tokens
        self.cache_write_tokens += other.cache_write_tokens
        self.known_cost += other.known_cost
        self.unknown_runs += other.unknown_runs


class PriceBook:
    """Every model's prices, read once, looked up by model and time."""

    def __init__(self, prices: Iterable[ModelPrice] | None = None) -> None:
        self._starts: dict[str, list[datetime]] = defaultdict(list)
        self._prices: dict[str, list[ModelPrice]] = defaultdict(list)
        for price in sorted(ModelPrice.objects.all() if prices is None else prices, key=lambda p: p.valid_from):
            self._starts[price.model].append(price.valid_from)
            self._prices[price.model].append(price)

    def price(self, model: str, at: datetime) -> ModelPrice | None:
        index = bisect.bisect_right(self._starts.get(model, []), at)
        return self._prices[model][index - 1] if index else None

    def usage(self, row: Row) -> Usage:
        """One run's usage and cost, from a row of `RUN_FIELDS`."""
        recorded: dict[str, Any] | None = row["usage"]
        if recorded is None:
            return Usage(unknown_runs=1 if row["status"] in _UNRECORDED else 0)
        usage = Usage(
            requests=recorded.get("requests", 0),
            input_tokens=recorded.get("input_tokens", 0),
            output_tokens=recorded.get("output_tokens", 0),
            cache_read_tokens=recorded.get("cache_read_tokens", 0),
            cache_write_tokens=recorded.get("cache_write_tokens", 0),
        )
        if not (usage.tokens or usage.cache_read_tokens or usage.cache_write_tokens):
            return usage
        price = self.price(row["profile_snapshot__model"] or "", row["created_at"])
        if price is None:
            usage.unknown_runs = 1
            return usage
        uncached = max(usage.input_tokens - usage.cache_read_tokens - usage.cache_write_tokens, 0)
        usage.known_cost = (
            uncached * price.input
            + usage.output_tokens * price.output
            + usage.cache_read_tokens * price.cache_read
            + usage.cache_write_tokens * price.cache_write
        ) / MILLION
        return usage


def usage_of(runs: QuerySet[Run], prices: PriceBook | None = None) -> Usage:
    """The summed usage and cost of `runs` (an execution's, a thread's, ...)."""
    return usage_by(runs, lambda row: "", prices).get("", Usage())


def usage_by(runs: QuerySet[Run], key: Callable[[Row], Any], prices: PriceBook | None = None) -> dict[Any, Usage]:
    prices = prices or PriceBook()
    sums: dict[Any, Usage] = defaultdict(Usage)
    for row in runs.values(*RUN_FIELDS).iterator():
        sums[key(row)].add(prices.usage(row))
    return dict(sums)


def day_of(row: Row) -> date:
    return timezone.localtime(row["created_at"]).date()
