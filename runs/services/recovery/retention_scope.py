"""What retention purges now: finished executions past their team policy's `retention_days`, with their Host-managed
children, none of them on hold; and which of an execution's checkpoints may go without breaking what stays."""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Q, QuerySet

from runs.models import (
    FINISHED_EXECUTION_STATUSES,
    Checkpoint,
    DecisionSubmission,
    DeferredRequest,
    Execution,
    ExecutionTombstone,
    HostPolicy,
    Run,
    Thread,
)

__all__ = ("Due", "due_families", "purgeable_checkpoints", "unheld")


@dataclass(frozen=True)
class Due:
    """An execution retention purges now, and its Host-managed children (which go with it, never before)."""

    family: list[Execution]
    retention_days: int


def unheld(executions: QuerySet[Execution]) -> QuerySet[Execution]:
    """Those retention may purge: finished, not purged yet, and neither they nor their threads on hold."""
    return executions.filter(
        status__in=FINISHED_EXECUTION_STATUSES, tombstone__isnull=True, held_at=None, thread__held_at=None
    )


def _family(root: Execution) -> list[Execution] | None:
    """The root and its children, depth first by level; None when any of them is unfinished or on hold."""
    family = [root]
    frontier = [root.pk]
    while frontier:
        children = list(Execution.objects.filter(parent_request__execution_id__in=frontier).order_by("pk"))
        if not children:
            return family
        if unheld(Execution.objects.filter(pk__in=[child.pk for child in children])).count() != len(children):
            return None
        family += children
        frontier = [child.pk for child in children]
    return family


def due_families(now: datetime, *, team_ids: Collection[int] | None = None) -> Iterator[Due]:
    """Each team policy's expired executions, oldest end first. Children are reached through their parent only."""
    policies = HostPolicy.objects.filter(current_version__retention_days__isnull=False).select_related(
        "current_version"
    )
    if team_ids is not None:
        policies = policies.filter(team_id__in=team_ids)
    for policy in policies.order_by("pk"):
        assert policy.current_version is not None and policy.current_version.retention_days is not None
        days = policy.current_version.retention_days
        roots = unheld(Execution.objects.filter(thread__team_id=policy.team_id, parent_request=None)).filter(
            finished_at__lt=now - timedelta(days=days)
        )
        # A list, not a cursor: the pass writes between two of them.
        for root in list(roots.order_by("finished_at", "pk")):
            family = _family(root)
            if family is not None:
                yield Due(family=family, retention_days=days)


def purgeable_checkpoints(execution: Execution, *, also_purged: Collection[int] = ()) -> list[int]:
    """The execution's checkpoints nothing that stays depends on, children of a chain before their parents.

    A thread's checkpoints form delta chains across its executions, so a checkpoint stays while anything kept needs
    it or any checkpoint after it in its chain: the thread's selected checkpoint (the thread goes on from there),
    checkpoints of executions not purged, a fork's origin, a run's start, and the checkpoints decisions and requests
    point at (the audit of decisions stays). `also_purged` names executions counted as purged already (a dry run).
    """
    thread = Thread.objects.only("selected_checkpoint_id").get(pk=execution.thread_id)
    purged = {
        *ExecutionTombstone.objects.filter(execution__thread_id=thread.pk).values_list("execution_id", flat=True),
        *also_purged,
        execution.pk,
    }
    rows = list(Checkpoint.objects.filter(thread_id=thread.pk).values_list("pk", "parent_id", "run__execution_id"))
    parents = {pk: parent for pk, parent, _ in rows}
    kept: set[int | None] = {pk for pk, _, owner in rows if owner not in purged}
    kept.add(thread.selected_checkpoint_id)
    in_thread = Q(checkpoint__thread_id=thread.pk)
    kept.update(DeferredRequest.objects.filter(in_thread).values_list("checkpoint_id", flat=True))
    kept.update(DecisionSubmission.objects.filter(in_thread).values_list("checkpoint_id", flat=True))
    kept.update(Thread.objects.filter(forked_from__thread_id=thread.pk).values_list("forked_from_id", flat=True))
    kept.update(
        Run.objects.filter(start_checkpoint__thread_id=thread.pk)
        .exclude(execution_id__in=purged)
        .values_list("start_checkpoint_id", flat=True)
    )
    needed: set[int] = set()
    for start in kept:
        # A delta's chain runs through its parents to its base: each of them is needed too.
        cursor = start
        while cursor is not None and cursor not in needed:
            needed.add(cursor)
            cursor = parents.get(cursor)
    return sorted((pk for pk, _, owner in rows if owner == execution.pk and pk not in needed), reverse=True)
