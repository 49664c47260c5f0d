"""An execution's time, computed once: when each run worked (its active span) and what every pause between runs
was spent on (its waits). The page header, the lane heads, the time axis and the gaps between lanes all read this
one model (the page's script only extends what is still open to "now"), so they cannot disagree.

Active time is the runs' spans added up; wall time runs from the first run's start to the end of the last run or
wait, so wall time = active time + waits. A dead run's span ends at its last sign of life: the time until its
lease expired is a wait ("lease expired"), not work. A run suspended for answers is followed by a wait for them,
split at the decision; an execution cancelled (or expired) while waiting ends with that wait, drawn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, TypedDict

from django.utils import timezone

from runs.models import ACTIVE_EXECUTION_STATUSES, DeferredKind, Execution, Run, RunReason, RunStatus, TimelineEvent

from ..timeline import DECISION_EVENT_NAME, read_side

WaitKind = Literal["approval", "resume", "lease", "recovery", "other"]

# What a suspended run waits for, by the kinds of its requests (a mix waits for "answers").
WAITING_FOR: dict[str, str] = {
    DeferredKind.APPROVAL: "waiting for approval",
    DeferredKind.EXTERNAL: "waiting for an external result",
    DeferredKind.QUESTION: "waiting for an answer",
    DeferredKind.CHILD: "waiting for a child execution",
}


@dataclass(frozen=True)
class RunSpan:
    run: Run
    start: datetime
    end: datetime | None  # None: still running

    def active(self, now: datetime) -> timedelta:
        return (self.end or now) - self.start


@dataclass(frozen=True)
class Wait:
    start: datetime
    end: datetime | None  # None: still waiting
    kind: WaitKind
    cause: str

    def length(self, now: datetime) -> timedelta:
        return (self.end or now) - self.start


class SpanJson(TypedDict):
    run: int
    start: int
    end: int | None


class WaitJson(TypedDict):
    start: int
    end: int | None
    kind: str
    cause: str
    # The run it follows, and the run it comes before (None: it ends the execution or is still under way).
    after_run: int
    before_run: int | None


class TimesJson(TypedDict):
    """The model as the page's script reads it: ms since the epoch; `end` null is still open."""

    runs: list[SpanJson]
    waits: list[WaitJson]
    now: int


@dataclass(frozen=True)
class ExecutionTimes:
    spans: list[RunSpan]
    # Each wait with the pks of the runs before and after it (after None: it ends the execution, or goes on).
    waits: list[tuple[Wait, int, int | None]]

    @property
    def start(self) -> datetime | None:
        return self.spans[0].start if self.spans else None

    def end(self, now: datetime) -> datetime | None:
        ends = [span.end or now for span in self.spans] + [wait.end or now for wait, _, _ in self.waits]
        return max(ends) if ends else None

    def active(self, now: datetime) -> timedelta:
        return sum((span.active(now) for span in self.spans), timedelta())

    def waited(self, now: datetime) -> timedelta:
        return sum((wait.length(now) for wait, _, _ in self.waits), timedelta())

    def wall(self, now: datetime) -> timedelta:
        start, end = self.start, self.end(now)
        return end - start if start and end else timedelta()

    def as_json(self, now: datetime) -> TimesJson:
        return TimesJson(
            runs=[SpanJson(run=span.run.pk, start=_ms(span.start), end=_ms(span.end)) for span in self.spans],
            waits=[
                WaitJson(
                    start=_ms(wait.start),
                    end=_ms(wait.end),
                    kind=wait.kind,
                    cause=wait.cause,
                    after_run=after,
                    before_run=before,
                )
                for wait, after, before in self.waits
            ],
            now=_ms(now),
        )


def _ms(moment: datetime | None) -> Any:
    return round(moment.timestamp() * 1000) if moment else None


def execution_times(execution: Execution, runs: Sequence[Run] | None = None) -> ExecutionTimes:
    runs = list(runs if runs is not None else execution.runs.order_by("number"))
    spans: list[RunSpan] = []
    for run in runs:
        span = _span(run)
        if span is None:
            continue
        # Clocks of different workers may disagree a little: time never runs backwards.
        if spans and span.start < (floor := spans[-1].end or span.start):
            span = RunSpan(run=run, start=floor, end=max(span.end, floor) if span.end else None)
        spans.append(span)
    waits: list[tuple[Wait, int, int | None]] = []
    for index, span in enumerate(spans):
        following = spans[index + 1] if index + 1 < len(spans) else None
        if span.end is None:
            continue
        if following is not None:
            waits += [(wait, span.run.pk, following.run.pk) for wait in _waits_between(span, following)]
        else:
            waits += [(wait, span.run.pk, None) for wait in _waits_after(span, execution)]
    return ExecutionTimes(spans=spans, waits=waits)


def _span(run: Run) -> RunSpan | None:
    if run.started_at is None:
        return None
    if run.status == RunStatus.RUNNING:
        return RunSpan(run=run, start=run.started_at, end=None)
    if run.status == RunStatus.ABANDONED:
        return RunSpan(run=run, start=run.started_at, end=max(run.started_at, _last_alive(run)))
    end = run.finished_at or _last_event_at(run) or run.started_at
    return RunSpan(run=run, start=run.started_at, end=max(run.started_at, end))


def _event_time(event: TimelineEvent) -> datetime:
    # The projection stamps each event with its source item's time (ms); the row's time is the fallback.
    stamp = event.event.get("timestamp") if isinstance(event.event, dict) else None
    return datetime.fromtimestamp(stamp / 1000, tz=UTC) if isinstance(stamp, int | float) else event.occurred_at


def _last_event_at(run: Run) -> datetime | None:
    last = TimelineEvent.objects.filter(run=run).order_by("-position").first()
    return _event_time(last) if last else None


def _last_alive(run: Run) -> datetime:
    """A dead run's last sign of life: its last event before the end the sweeper wrote into its lane."""
    last_two = list(TimelineEvent.objects.filter(run=run).order_by("-position")[:2])
    if len(last_two) == 2 and last_two[0].event_type == "RUN_ERROR":
        return _event_time(last_two[1])
    if last_two and last_two[0].event_type != "RUN_ERROR":
        return _event_time(last_two[0])
    return run.heartbeat_at or run.started_at or datetime.now(tz=UTC)


def _decision(run: Run) -> tuple[datetime, bool] | None:
    """When the suspended run's requests were answered, and whether by expiry."""
    row = TimelineEvent.objects.filter(run=run, event__name=DECISION_EVENT_NAME).order_by("position").first()
    if row is None:
        return None
    value = row.event.get("value") or {}
    return _event_time(row), bool(value.get("expired"))


def waiting_for(run: Run) -> str:
    kinds = set(run.deferred_requests.values_list("kind", flat=True))
    if len(kinds) > 1:
        return "waiting for answers"
    return WAITING_FOR.get(next(iter(kinds), DeferredKind.APPROVAL), "waiting for approval")


def _answer_wait(span: RunSpan, until: datetime | None, *, ended_as: str = "") -> list[Wait]:
    """The wait of a suspended run: for its answers until the decision, then for the resuming run; or, if the
    execution ended while it waited (`ended_as`: cancelled, expired), one wait to that end."""
    assert span.end is not None
    cause = waiting_for(span.run)
    if ended_as:
        return [Wait(span.end, until, "approval", f"{cause}, then {ended_as}")]
    decision = _decision(span.run)
    if decision is None or decision[0] < span.end or (until is not None and decision[0] > until):
        return [Wait(span.end, until, "approval", cause)]
    decided, expired = decision
    answered = Wait(span.end, decided, "approval", f"{cause}, then expired" if expired else cause)
    if until is None:
        return [answered, Wait(decided, None, "resume", "before the resuming run")]
    return [answered, Wait(decided, until, "resume", "from the answer to the resuming run")]


def _waits_between(span: RunSpan, following: RunSpan) -> list[Wait]:
    assert span.end is not None
    start, end = span.end, max(following.start, span.end)
    if span.run.status == RunStatus.ABANDONED:
        abandoned = span.run.finished_at
        if abandoned is not None and start <= abandoned <= end:
            return [Wait(start, abandoned, "lease", "lease expired"), Wait(abandoned, end, "recovery", "recovery")]
        return [Wait(start, end, "recovery", "lease expired, then recovery")]
    if following.run.reason == RunReason.RESUME:
        return _answer_wait(span, end)
    if following.run.reason == RunReason.RECOVERY:
        return [Wait(start, end, "recovery", "recovery")]
    return [Wait(start, end, "other", "before the next run")]


def _waits_after(span: RunSpan, execution: Execution) -> list[Wait]:
    """After the last run: an open wait while the execution goes on; a closed one if it ended while waiting."""
    assert span.end is not None
    active = execution.status in ACTIVE_EXECUTION_STATUSES
    run = span.run
    if active:
        if run.status == RunStatus.SUSPENDED:
            return _answer_wait(span, None)
        if run.status == RunStatus.ABANDONED:
            return [Wait(span.end, None, "recovery", "lease expired, then recovery")]
        return [Wait(span.end, None, "other", "before the next run")]
    ended = execution.finished_at or execution.cancelled_at
    if run.status == RunStatus.SUSPENDED and ended is not None and ended > span.end:
        return _answer_wait(span, ended, ended_as=execution.status)
    return []


@dataclass(frozen=True)
class Totals:
    """The header's words for an execution's time."""

    runs: int
    active: str
    wall: str
    # Empty when nothing was waited (under 50 ms, what reads "0.0 s").
    waited: str
    tokens: str


def totals(times: ExecutionTimes, runs: Sequence[Run], now: datetime) -> Totals:
    waited = times.waited(now)
    usages = [run.usage for run in runs if run.usage]
    tokens_in = sum(int(usage.get("input_tokens") or 0) for usage in usages)
    tokens_out = sum(int(usage.get("output_tokens") or 0) for usage in usages)
    return Totals(
        runs=len(times.spans),
        active=read_side.format_duration(times.active(now)),
        wall=read_side.format_duration(times.wall(now)),
        waited=read_side.format_duration(waited) if waited >= timedelta(milliseconds=50) else "",
        tokens=f"{tokens_in} in · {tokens_out} out tokens" if usages else "",
    )


def active_texts(times: ExecutionTimes, now: datetime) -> dict[int, str]:
    """Each started run's active time, by run pk, for its lane head."""
    return {span.run.pk: read_side.format_duration(span.active(now)) for span in times.spans}


def run_active_text(run: Run) -> str:
    """One run's active time as its execution's model counts it (the run page)."""
    return active_texts(execution_times(run.execution), timezone.now()).get(run.pk, "")
