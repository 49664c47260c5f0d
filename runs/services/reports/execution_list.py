"""The list of executions: every execution a user may see, filtered, newest first, a page at a time by keyset.

Pages are cut by the key (`created_at`, `pk`) of the last row shown, never by OFFSET: the next page of a list
of 100,000 executions costs what the first one does, and rows that arrive meanwhile do not shift it. The
indexes of `Execution.Meta` lead with each filter's column and end with that key, so a filtered page is read in
order from one index. Text is matched in `shown_input`, the input as pages show it: matching the stored input
would tell which executions hold a masked secret.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Count, Exists, F, OuterRef, Q, QuerySet

from runs.models import (
    AgentProfile,
    DeferredKind,
    DeferredRequest,
    DeferredStatus,
    Execution,
    ExecutionStatus,
    Thread,
    ToolDispatch,
)

from ..store import access

__all__ = (
    "WAITING_FOR",
    "Cursor",
    "ExecutionFilters",
    "ExecutionPage",
    "execution_page",
    "status_counts",
)

WAITING_FOR = tuple(DeferredKind.values)
"""What a waiting execution may wait for: an approval, an answer to a question, an external result, a child."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


@dataclass(frozen=True)
class Cursor:
    """The key of one row of the list: where a page ends and the next one starts."""

    created_at: datetime
    pk: int

    @classmethod
    def of(cls, execution: Execution) -> Cursor:
        return cls(execution.created_at, execution.pk)

    @classmethod
    def parse(cls, text: str) -> Cursor:
        """A cursor from its URL form `<microseconds since 1970>-<pk>`; ValueError if it is not one."""
        micros, separator, pk = text.partition("-")
        if not separator or not micros.isdigit() or not pk.isdigit():
            raise ValueError(f"not a list position: {text[:40]!r}")
        return cls(_EPOCH + int(micros) * _MICROSECOND, int(pk))

    def __str__(self) -> str:
        return f"{(self.created_at - _EPOCH) // _MICROSECOND}-{self.pk}"


@dataclass(frozen=True)
class ExecutionFilters:
    """What the list is narrowed to; every empty field matches everything."""

    viewer: User | AnonymousUser
    status: str = ""
    waiting_for: str = ""
    profile: AgentProfile | None = None
    tool: str = ""
    failure_code: str = ""
    started_by: User | None = None
    started_from: datetime | None = None
    started_to: datetime | None = None
    has_fork: bool | None = None
    text: str = ""

    def matching(self) -> QuerySet[Execution]:
        """Every visible execution these filters match, unordered."""
        executions = _visible(self.viewer)
        if self.waiting_for:
            executions = executions.filter(status=ExecutionStatus.WAITING).filter(
                Exists(
                    DeferredRequest.objects.filter(
                        execution=OuterRef("pk"),
                        checkpoint_id=OuterRef("thread__selected_checkpoint_id"),
                        status=DeferredStatus.PENDING,
                        kind=self.waiting_for,
                    )
                )
            )
        elif self.status:
            executions = executions.filter(status=self.status)
        return self._besides_status(executions)

    def without_status(self) -> ExecutionFilters:
        return replace(self, status="", waiting_for="")

    def _besides_status(self, executions: QuerySet[Execution]) -> QuerySet[Execution]:
        if self.profile is not None:
            executions = executions.filter(thread__profile=self.profile)
        if self.tool:
            # A call the worker let through, or one that waited (or waits) for an answer.
            executions = executions.filter(
                Exists(ToolDispatch.objects.filter(run__execution=OuterRef("pk"), tool_name=self.tool))
                | Exists(DeferredRequest.objects.filter(execution=OuterRef("pk"), tool_name=self.tool))
            )
        if self.failure_code:
            executions = executions.filter(failure_code=self.failure_code)
        if self.started_by is not None:
            executions = executions.filter(created_by=self.started_by)
        if self.started_from is not None:
            executions = executions.filter(created_at__gte=self.started_from)
        if self.started_to is not None:
            executions = executions.filter(created_at__lt=self.started_to)
        if self.has_fork is not None:
            # A fork starts from a checkpoint one of the execution's runs wrote.
            forked = Exists(Thread.objects.filter(forked_from__run__execution=OuterRef("pk")))
            executions = executions.filter(forked if self.has_fork else ~forked)
        if self.text:
            executions = executions.filter(shown_input__icontains=self.text)
        return executions


def _visible(viewer: User | AnonymousUser) -> QuerySet[Execution]:
    """`access.visible_executions`, with the team test asked of each row's thread (a correlated EXISTS) instead of
    joined: a join lets the planner start from the team's threads and sort all their executions, where the list
    wants to walk its index newest first and stop after one page."""
    visible_thread = access.visible_threads(viewer).filter(pk=OuterRef("thread_id"))
    return Execution.objects.filter(Exists(visible_thread))


@dataclass(frozen=True)
class ExecutionPage:
    """One page of the list, newest first, with the cursors of the pages around it (None: there is none)."""

    rows: list[Execution]
    older: Cursor | None
    newer: Cursor | None


def execution_page(
    filters: ExecutionFilters, size: int, *, after: Cursor | None = None, before: Cursor | None = None
) -> ExecutionPage:
    """The `size` newest matches older than `after`, or the `size` oldest newer than `before` (shown newest first)."""
    matching = (
        filters.matching()
        .select_related("thread__profile", "created_by", "tombstone")
        # The list shows the masked input; the stored one is not read.
        .defer("input")
    )
    if before is not None:
        newer_first = matching.filter(_newer_than(before)).order_by("created_at", "pk")
        rows = list(newer_first[: size + 1])
        more_newer = len(rows) > size
        rows = rows[:size][::-1]
        return ExecutionPage(
            rows=rows,
            older=Cursor.of(rows[-1]) if rows else None,
            newer=Cursor.of(rows[0]) if rows and more_newer else None,
        )
    if after is not None:
        matching = matching.filter(_older_than(after))
    rows = list(matching.order_by("-created_at", "-pk")[: size + 1])
    more_older = len(rows) > size
    rows = rows[:size]
    return ExecutionPage(
        rows=rows,
        older=Cursor.of(rows[-1]) if rows and more_older else None,
        newer=Cursor.of(rows[0]) if rows and after is not None else None,
    )


def _older_than(cursor: Cursor) -> Q:
    return Q(created_at__lt=cursor.created_at) | Q(created_at=cursor.created_at, pk__lt=cursor.pk)


def _newer_than(cursor: Cursor) -> Q:
    return Q(created_at__gt=cursor.created_at) | Q(created_at=cursor.created_at, pk__gt=cursor.pk)


def status_counts(filters: ExecutionFilters) -> dict[str, Any]:
    """How many executions each status (and each thing a waiting one waits for) holds under the other filters."""
    base = filters.without_status()
    by_status = Counter(
        {row["status"]: row["n"] for row in base.matching().order_by().values("status").annotate(n=Count("pk"))}
    )
    # From the waiting executions to their pending requests at the thread's selected checkpoint: starting from the
    # requests let the planner walk each thread's executions for every request.
    waiting = (
        base.matching()
        .filter(
            status=ExecutionStatus.WAITING,
            deferred_requests__status=DeferredStatus.PENDING,
            deferred_requests__checkpoint_id=F("thread__selected_checkpoint_id"),
        )
        .order_by()
        .values("deferred_requests__kind")
        .annotate(n=Count("pk", distinct=True))
    )
    by_kind = Counter({row["deferred_requests__kind"]: row["n"] for row in waiting})
    return {
        "statuses": [(status, by_status[status]) for status in ExecutionStatus.values],
        "waiting_for": [(kind, by_kind[kind]) for kind in WAITING_FOR],
        "total": sum(by_status.values()),
    }
