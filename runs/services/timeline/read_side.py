"""Read side of the dashboard: timeline frames, run lanes, status snapshots and thread listings.

The websocket consumer, the SSE endpoint and the pages read through here, and views stay free of query logic. A
replayed frame is exactly the frame that was published live (`runs.protocol.timeline_frame`): both carry the
event's stored JSON text as `event_json`, which the replay reads as text and `event_frame_text` splices into the
socket message without decoding it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from django.db.models import Count, OuterRef, Q, QuerySet, Subquery, TextField
from django.db.models.functions import Cast, Coalesce, Greatest

from runs.models import (
    Checkpoint,
    DeferredRequest,
    Execution,
    ExecutionStatus,
    Run,
    Thread,
    TimelineEvent,
)
from runs.protocol import (
    EventFrame,
    ExecutionStatusMessage,
    Origin,
    RunSummary,
    ThreadStatus,
    TimelineFrame,
    Tokens,
    encode_event,
    event_frame_text,
    timeline_frame,
)

REPLAY_PAGE_SIZE = 2000
IDLE = "idle"
THREAD_STATUSES = (IDLE, *ExecutionStatus.values)

_FRAME_FIELDS = ("position", "run_id", "run__run_id", "run__number", "subagent_run_id", "origin", "event_json")


def frame_of(event: TimelineEvent) -> TimelineFrame:
    """One stored event as its frame, for pages and tests (a replay reads rows without decoding them instead)."""
    return timeline_frame(
        position=event.position,
        run=event.run.pk,
        run_id=event.run.run_id or "",
        run_number=event.run.number,
        subagent_run_id=event.subagent_run_id,
        origin=cast(Origin, event.origin),  # the column holds TimelineOrigin's values, the protocol's origins
        event_json=encode_event(event.event),
    )


def socket_frame_of(event: TimelineEvent) -> EventFrame:
    """One stored event as the socket sends it, decoded: what an event's "raw" page shows."""
    frame: EventFrame = json.loads(event_frame_text(frame_of(event)))
    return frame


def _frame_rows(rows: QuerySet[TimelineEvent], limit: int | None = None) -> list[TimelineFrame]:
    # The event is read as the stored text, never decoded; rows come as tuples (a replay reads 100k of them, and
    # a dict per row cost more than the frame built from it). `run_id` of the row is the Run FK; the harness run
    # id comes through the join.
    values = rows.order_by("position").annotate(event_json=Cast("event", TextField())).values_list(*_FRAME_FIELDS)
    return [
        timeline_frame(
            position=position,
            run=run,
            run_id=run_id or "",
            run_number=run_number,
            subagent_run_id=subagent_run_id,
            origin=origin,
            event_json=event_json,
        )
        for position, run, run_id, run_number, subagent_run_id, origin, event_json in (
            values if limit is None else values[:limit]
        )
    ]


def frames_after(execution_pk: int, after: int, limit: int = REPLAY_PAGE_SIZE) -> list[TimelineFrame]:
    """One page of frames with position > after, in position order (served by the (execution, position) index)."""
    return _frame_rows(TimelineEvent.objects.filter(execution_id=execution_pk, position__gt=after), limit)


def frames_between(execution_pk: int, after: int, before: int) -> list[TimelineFrame]:
    """Frames strictly between two positions: what a live subscriber missed when a published message was lost."""
    return _frame_rows(TimelineEvent.objects.filter(execution_id=execution_pk, position__gt=after, position__lt=before))


def last_position(execution_pk: int) -> int:
    last = TimelineEvent.objects.filter(execution_id=execution_pk).order_by("-position").values("position").first()
    return last["position"] if last else 0


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment else None


def run_summary(run: Run) -> RunSummary:
    return RunSummary(
        pk=run.pk,
        run_id=run.run_id or "",
        number=run.number,
        reason=run.reason,
        status=run.status,
        started_at=_iso(run.started_at),
        finished_at=_iso(run.finished_at),
        attempt=run.attempt,
        tool_recovery=run.tool_recovery,
        tokens=_tokens(run.usage),
    )


def _tokens(usage: dict[str, Any] | None) -> Tokens | None:
    """A finished run's token counts (its stored RunUsageSummary), for its lane head and the execution's totals."""
    if not usage:
        return None
    return Tokens(input=int(usage.get("input_tokens") or 0), output=int(usage.get("output_tokens") or 0))


def execution_status_message(execution: Execution) -> ExecutionStatusMessage:
    """The `execution.status` group message, also sent to each new subscriber as its first frame."""
    return ExecutionStatusMessage(
        type="execution.status",
        execution=execution.pk,
        status=execution.status,
        runs=[run_summary(run) for run in execution.runs.order_by("number")],
    )


def execution_status_snapshot(execution_pk: int) -> ExecutionStatusMessage:
    return execution_status_message(Execution.objects.get(pk=execution_pk))


def thread_status_messages(thread_pks: Iterable[int]) -> list[ThreadStatus]:
    """The current `thread.status` of each listed thread: what a list page's socket sends before going live."""
    threads = Thread.objects.filter(pk__in=list(thread_pks)).annotate(**_latest_execution_annotations())
    return [
        ThreadStatus(
            type="thread.status",
            thread=thread.pk,
            # Annotated by `_latest_execution_annotations`; through `**` django-stubs cannot see the names.
            execution=thread.latest_execution_pk,  # type: ignore[attr-defined]
            status=thread.latest_status or IDLE,  # type: ignore[attr-defined]
        )
        for thread in threads
    ]


def _latest_execution_annotations() -> dict[str, Subquery[Any]]:
    latest = Execution.objects.filter(thread=OuterRef("pk")).order_by("-number")
    return {
        "latest_status": Subquery(latest.values("status")[:1]),
        "latest_execution_pk": Subquery(latest.values("pk")[:1]),
        "latest_activity": Subquery(latest.values("created_at")[:1]),
    }


def _last_event_of_latest_execution() -> QuerySet[TimelineEvent, Any]:
    # The newest execution holds the thread's last event (one runs at a time); its position index finds it.
    return (
        TimelineEvent.objects.filter(execution_id=OuterRef("latest_execution_pk"))
        .order_by("-position")
        .values("occurred_at")[:1]
    )


def threads_overview(*, search: str = "", status: str = "") -> QuerySet[Thread]:
    """Threads, newest activity first, with their latest execution's status; filtered by text and status."""
    threads = (
        Thread.objects.select_related("profile")
        .annotate(**_latest_execution_annotations(), execution_count=Count("executions", distinct=True))
        .annotate(last_event_at=Subquery(_last_event_of_latest_execution()))
        # Activity is the thread's last event; before any, its newest execution or its own last change.
        .annotate(
            activity_at=Greatest(
                "updated_at",
                Coalesce("last_event_at", "latest_activity", "updated_at"),
                Coalesce("latest_activity", "updated_at"),
            )
        )
        .order_by("-activity_at", "-pk")
    )
    if search:
        threads = threads.filter(
            Q(title__icontains=search)
            | Q(thread_id__icontains=search)
            | Q(executions__shown_input__icontains=search)
            | Q(profile__name__icontains=search)
        ).distinct()
    if status == IDLE:
        threads = threads.filter(latest_status__isnull=True)
    elif status:
        # An annotation django-stubs cannot see (see `thread_status_messages`).
        threads = threads.filter(latest_status=status)  # type: ignore[misc]
    return threads


def fork_ancestry(thread: Thread) -> list[tuple[Thread, Checkpoint]]:
    """The chain of forks that led to this thread, oldest first: (source thread, checkpoint forked from)."""
    chain: list[tuple[Thread, Checkpoint]] = []
    seen = {thread.pk}
    origin = thread.forked_from
    while origin is not None:
        source = origin.thread
        chain.append((source, origin))
        if source.pk in seen:  # a corrupt cycle must not hang the page
            break
        seen.add(source.pk)
        origin = source.forked_from
    chain.reverse()
    return chain


def forks_of(thread: Thread) -> QuerySet[Thread]:
    return Thread.objects.filter(forked_from__thread=thread).select_related("forked_from").order_by("created_at")


@dataclass(frozen=True)
class Lane:
    """One harness run of an execution as the timeline shows it."""

    run: Run
    event_count: int

    def summary(self) -> RunSummary:
        return RunSummary(**run_summary(self.run), event_count=self.event_count)


def format_duration(duration: timedelta | None) -> str:
    """Short human form; dom.js `formatDuration` formats live durations the same way."""
    if duration is None:
        return ""
    seconds = duration.total_seconds()
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, seconds = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def lanes_of(execution: Execution) -> list[Lane]:
    runs = list(execution.runs.select_related("start_checkpoint").order_by("number"))
    counts = dict(
        TimelineEvent.objects.filter(execution=execution).values_list("run").annotate(count=Count("pk")).order_by()
    )
    return [Lane(run=run, event_count=counts.get(run.pk, 0)) for run in runs]


def executions_of(thread: Thread) -> QuerySet[Execution]:
    # The list shows each input as stored masked (`shown_input`); the real one is not read.
    return thread.executions.defer("input").order_by("-number")


def checkpoints_of(owner: Thread | Run) -> QuerySet[Checkpoint]:
    """A thread's checkpoints newest first (for forking); a run's in the order it wrote them."""
    if isinstance(owner, Thread):
        return owner.checkpoints.select_related("run__execution").order_by("-pk")
    return owner.checkpoints.order_by("pk")


def deferred_requests_of(run: Run) -> QuerySet[DeferredRequest]:
    return run.deferred_requests.order_by("pk")


def prefix_end(run_pk: int, journal_index: int) -> int | None:
    """The last timeline position of a run's items up to its journal entry `journal_index` (where a checkpoint
    stands): what a run that went on from that checkpoint took over."""
    prefix = TimelineEvent.objects.filter(run_id=run_pk, journal_entry__index__lte=journal_index)
    last: int | None = prefix.order_by("-position").values_list("position", flat=True).first()
    return last


def run_events(run: Run) -> QuerySet[TimelineEvent]:
    return run.timeline.order_by("position").only(
        "position", "event_type", "subagent_run_id", "occurred_at", "execution_id", "run_id"
    )


def timeline_event(execution_pk: int, position: int) -> TimelineEvent:
    return TimelineEvent.objects.select_related("run", "execution__thread", "journal_entry").get(
        execution_id=execution_pk, position=position
    )
