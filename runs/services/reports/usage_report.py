"""The /usage/ page: a team-scoped window of days, its sums by day, profile, user and model, and a bar chart drawn
as SVG on the server (the template writes the shapes computed here; no script, no chart library)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal

from django.utils import timezone

from runs.models import Run

from ..store import access
from ..store.access import User
from .costs import PriceBook, Row, Usage, day_of, usage_by

__all__ = ("CHART_HEIGHT", "CHART_WIDTH", "MAX_DAYS", "Bar", "UsageReport", "usage_report")

MAX_DAYS = 366
CHART_WIDTH = 720
CHART_HEIGHT = 180
# Room under the bars for the first and last day's labels.
LABEL_HEIGHT = 20


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    day: date
    usage: Usage
    # Part of this day's cost is unknown: the bar is marked, never shown as complete.
    partial: bool


@dataclass(frozen=True)
class UsageReport:
    days: int
    total: Usage
    by_day: list[tuple[date, Usage]]
    by_profile: list[tuple[str, Usage]]
    by_user: list[tuple[str, Usage]]
    by_model: list[tuple[str, Usage]]
    measure: str  # what the bars show: "cost" once any cost is known, else "tokens"
    bars: list[Bar]
    peak: str


def _sorted(sums: dict[str, Usage]) -> list[tuple[str, Usage]]:
    return sorted(sums.items(), key=lambda item: (-item[1].known_cost, -item[1].tokens, item[0]))


def usage_report(user: User, days: int) -> UsageReport:
    today = timezone.localdate()
    first = today - timedelta(days=days - 1)
    start = timezone.make_aware(datetime.combine(first, time.min))
    runs = Run.objects.filter(execution__in=access.visible_executions(user), created_at__gte=start)
    prices = PriceBook()
    per_day = usage_by(runs, day_of, prices)
    by_day = [(first + timedelta(days=n), per_day.get(first + timedelta(days=n), Usage())) for n in range(days)]
    total = Usage()
    for _, usage in by_day:
        total.add(usage)

    def named(field: str) -> list[tuple[str, Usage]]:
        def key(row: Row) -> str:
            return str(row[field] or "—")

        return _sorted(usage_by(runs, key, prices))

    measure = "cost" if total.known_cost else "tokens"
    bars, peak = _bars(by_day, measure)
    return UsageReport(
        days=days,
        total=total,
        by_day=by_day,
        by_profile=named("profile_snapshot__name"),
        by_user=named("execution__created_by__username"),
        by_model=named("profile_snapshot__model"),
        measure=measure,
        bars=bars,
        peak=peak,
    )


def _bars(by_day: list[tuple[date, Usage]], measure: str) -> tuple[list[Bar], str]:
    def value(usage: Usage) -> Decimal:
        return usage.known_cost if measure == "cost" else Decimal(usage.tokens)

    peak = max((value(usage) for _, usage in by_day), default=Decimal(0))
    slot = CHART_WIDTH / max(len(by_day), 1)
    drawn = CHART_HEIGHT - LABEL_HEIGHT
    bars = []
    for index, (day, usage) in enumerate(by_day):
        height = float(value(usage) / peak) * drawn if peak else 0.0
        bars.append(
            Bar(
                x=round(index * slot + slot * 0.1, 2),
                y=round(drawn - height, 2),
                width=round(slot * 0.8, 2),
                height=round(height, 2),
                day=day,
                usage=usage,
                partial=usage.unknown_runs > 0,
            )
        )
    return bars, (f"{peak:.4f}" if measure == "cost" else f"{peak:,.0f}")
