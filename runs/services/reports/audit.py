"""The audit: decisions, cancellations (and cancel requests dropped because the run suspended first), what-if forks
and policy versions, filtered alike for the page and the CSV export.

Decisions show the values of runs (arguments, results, messages), so every such value passes through the
redaction of its execution's policy version (`AuditRow`), on the page and in the export alike.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any, TypeVar

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Model, Q, QuerySet
from django.utils import timezone

from runs.models import Decision, DeferredKind, DroppedCancelRequest, Execution, HostPolicyVersion, Run, Thread

from ..store import access
from ..timeline.redaction import redactor_for

M = TypeVar("M", bound=Model)

__all__ = ("CSV_COLUMNS", "AuditFilters", "AuditRow", "audit_rows", "csv_lines")


@dataclass(frozen=True)
class AuditFilters:
    """Thread, user (who decided, cancelled or published) and an inclusive day range; None = any. `viewer`: whose
    teams the rows come from (None: every team's, for the Host itself)."""

    viewer: User | AnonymousUser | None = None
    thread: Thread | None = None
    user: User | None = None
    date_from: date | None = None
    date_to: date | None = None

    def decisions(self) -> QuerySet[Decision]:
        """What people (or the expiry) decided; the Host's answers from Host-managed children are not decisions."""
        decisions = (
            Decision.objects.exclude(request__kind=DeferredKind.CHILD)
            .select_related(
                "request__run",
                "request__execution__thread",
                "request__execution__policy_version",
                "submission__resume_run",
                "decided_by",
            )
            .order_by("-decided_at", "-id")
        )
        if self.thread is not None:
            decisions = decisions.filter(request__execution__thread=self.thread)
        if self.user is not None:
            decisions = decisions.filter(decided_by=self.user)
        return self._visible(decisions.filter(**self._between("decided_at")))

    def cancellations(self) -> QuerySet[Execution]:
        cancelled = (
            Execution.objects.filter(cancelled_at__isnull=False)
            .select_related("thread", "cancelled_by")
            .order_by("-cancelled_at", "-id")
        )
        if self.thread is not None:
            cancelled = cancelled.filter(thread=self.thread)
        if self.user is not None:
            cancelled = cancelled.filter(cancelled_by=self.user)
        return self._visible(cancelled.filter(**self._between("cancelled_at")))

    def dropped_cancel_requests(self) -> QuerySet[DroppedCancelRequest]:
        dropped = DroppedCancelRequest.objects.select_related("execution__thread", "run", "requested_by").order_by(
            "-requested_at", "-id"
        )
        if self.thread is not None:
            dropped = dropped.filter(execution__thread=self.thread)
        if self.user is not None:
            dropped = dropped.filter(requested_by=self.user)
        return self._visible(dropped.filter(**self._between("requested_at")))

    def what_ifs(self) -> QuerySet[Execution]:
        """What-if forks made (by the user filtered for), of or on the thread filtered for."""
        forks = (
            Execution.objects.filter(what_if__isnull=False)
            .select_related("thread", "created_by")
            .order_by("-created_at", "-id")
        )
        if self.thread is not None:
            forks = forks.filter(Q(thread=self.thread) | Q(what_if_of__thread=self.thread))
        if self.user is not None:
            forks = forks.filter(created_by=self.user)
        return self._visible(forks.filter(**self._between("created_at")))

    def versions(self) -> QuerySet[HostPolicyVersion]:
        if self.thread is not None:
            # Policy changes belong to no thread; with a thread filter only its records are relevant.
            return HostPolicyVersion.objects.none()
        versions = HostPolicyVersion.objects.select_related("policy", "created_by").order_by("-created_at", "-id")
        if self.user is not None:
            versions = versions.filter(created_by=self.user)
        return self._visible(versions.filter(**self._between("created_at")))

    def _visible(self, rows: QuerySet[M]) -> QuerySet[M]:
        return rows if self.viewer is None else access.scoped(rows, self.viewer)

    def _between(self, field: str) -> dict[str, datetime]:
        bounds = {}
        if self.date_from is not None:
            bounds[f"{field}__gte"] = _day_start(self.date_from)
        if self.date_to is not None:
            bounds[f"{field}__lt"] = _day_start(self.date_to) + timedelta(days=1)
        return bounds


def _day_start(day: date) -> datetime:
    return timezone.make_aware(datetime.combine(day, time.min), timezone.get_current_timezone())


@dataclass(frozen=True)
class AuditRow:
    """One decision as the audit shows it: its links and its values masked by the run's policy version."""

    decision: Decision
    approved_args: Any
    result: Any
    message: str

    @classmethod
    def of(cls, decision: Decision) -> AuditRow:
        redactor = redactor_for(decision.request.execution.policy_version)
        return cls(
            decision=decision,
            approved_args=redactor.value(decision.approved_args),
            result=redactor.value(decision.result),
            message=redactor.text(decision.message),
        )

    @property
    def execution(self) -> Execution:
        return self.decision.request.execution

    @property
    def suspended_run(self) -> Run:
        return self.decision.request.run

    @property
    def resume_run(self) -> Run | None:
        return self.decision.submission.resume_run

    @property
    def approved_args_json(self) -> str:
        return _json(self.approved_args, indent=2)

    @property
    def result_json(self) -> str:
        return _json(self.result, indent=2)


def _json(value: Any, indent: int | None = None) -> str:
    return "" if value is None else json.dumps(value, indent=indent, ensure_ascii=False)


def audit_rows(decisions: Iterable[Decision]) -> list[AuditRow]:
    return [AuditRow.of(decision) for decision in decisions]


CSV_COLUMNS = (
    "decided_at",
    "decided_by",
    "thread",
    "thread_id",
    "execution",
    "suspended_run",
    "resume_run",
    "tool",
    "tool_call_id",
    "kind",
    "verdict",
    "edited",
    "approved_args",
    "args_digest",
    "message",
    "result",
)


class _Line:
    """A file for csv.writer whose write hands back the line instead of keeping it."""

    def write(self, line: str) -> str:
        return line


def csv_lines(decisions: Iterable[Decision]) -> Iterator[str]:
    """The export a line at a time: a header, then one decision a line, masked like the page."""
    writer = csv.writer(_Line())
    yield writer.writerow(CSV_COLUMNS)
    for decision in decisions:
        row = AuditRow.of(decision)
        request = decision.request
        yield writer.writerow(
            _cell(value)
            for value in (
                decision.decided_at.isoformat(),
                decision.decided_by.get_username() if decision.decided_by else "",
                str(row.execution.thread),
                row.execution.thread.thread_id,
                row.execution.number,
                row.suspended_run.number,
                row.resume_run.number if row.resume_run else "",
                request.tool_name,
                request.tool_call_id,
                request.kind,
                decision.verdict,
                "yes" if decision.override_args is not None else "",
                _json(row.approved_args),
                decision.args_digest,
                row.message,
                _json(row.result),
            )
        )


def _cell(value: Any) -> Any:
    # A spreadsheet runs a cell starting like a formula; text from models and users must stay text.
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value
