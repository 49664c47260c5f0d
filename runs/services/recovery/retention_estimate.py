"""A retention dry run: what the next pass would delete, per team, without deleting anything.

The bytes freed are estimated as the stored length of the columns that go: each journal entry's payload, each
timeline event's JSON as text, and each checkpoint's state and history delta (characters, which are bytes for the
ASCII JSON these mostly are). Row headers and index entries are not counted, so the real figure is somewhat larger;
on SQLite the file shrinks only after a VACUUM (docs/deploy.md).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Sum, TextField
from django.db.models.functions import Cast, Coalesce, Length
from django.utils import timezone

from runs.models import Checkpoint, Execution, ExecutionTombstone, JournalEntry, TimelineEvent

from .retention_scope import due_families, purgeable_checkpoints

__all__ = ("RetentionEstimate", "estimate")


@dataclass(frozen=True)
class RetentionEstimate:
    executions: int
    journal_entries: int
    timeline_events: int
    checkpoints: int
    bytes: int


def estimate(*, now: datetime | None = None, team_ids: Collection[int] | None = None) -> RetentionEstimate:
    """What `retention.run_pass(now=now)` would delete (run without a chunk limit) in the teams named (all: None)."""
    now = now or timezone.now()
    unfinished = ExecutionTombstone.objects.filter(finished_at=None)
    if team_ids is not None:
        unfinished = unfinished.filter(execution__thread__team_id__in=team_ids)
    pks = [
        *unfinished.values_list("execution_id", flat=True),
        *(execution.pk for due in due_families(now, team_ids=team_ids) for execution in due.family),
    ]
    journal = JournalEntry.objects.filter(run__execution_id__in=pks).aggregate(
        rows=Count("pk"), size=Coalesce(Sum(Length("payload")), 0)
    )
    timeline = TimelineEvent.objects.filter(execution_id__in=pks).aggregate(
        rows=Count("pk"), size=Coalesce(Sum(Length(Cast("event", TextField()))), 0)
    )
    doomed = [
        pk
        for execution in Execution.objects.filter(pk__in=pks)
        for pk in purgeable_checkpoints(execution, also_purged=pks)
    ]
    checkpoints = Checkpoint.objects.filter(pk__in=doomed).aggregate(
        rows=Count("pk"), size=Coalesce(Sum(Length("state_json") + Length("history_delta")), 0)
    )
    return RetentionEstimate(
        executions=len(pks),
        journal_entries=journal["rows"],
        timeline_events=timeline["rows"],
        checkpoints=checkpoints["rows"],
        bytes=journal["size"] + timeline["size"] + checkpoints["size"],
    )
