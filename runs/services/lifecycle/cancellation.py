"""Cancelling an execution: who asked and when is recorded; cancelling a waiting one is a decision.

A running (or queued, recovering) execution is asked to stop: the worker cancels the stream at its next
heartbeat. If the run suspends for answers before a heartbeat saw the request, the request is dropped and
recorded (`DroppedCancelRequest`): stopping a waiting execution is a decision, and a request made while it
ran must not stop the run that resumes it after an approver's answer. A waiting execution ends at once, and
since that refuses the calls it waits on, it needs the role that answers them (`answer_role`: an approver's when
the set holds an approval, else an operator's): its open set is recorded as decisions `cancelled` by the user (a
decision item in the timeline, rows in the audit), and nothing resumes. Cancelling an execution cancels its
Host-managed children too (by the same user), and a child that ends cancelled answers its parent's call with a
failure (see `children`).
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils import timezone

from runs.models import (
    ACTIVE_EXECUTION_STATUSES,
    DeferredRequest,
    DeferredStatus,
    DroppedCancelRequest,
    Execution,
    ExecutionStatus,
)

from ..timeline.publishing import publish_execution_status
from .approvals import ANSWER_REFUSED, can_decide, pending_requests, record_cancellation
from .children import answer_parent

__all__ = ("cancel_execution", "drop_unseen_request")


def cancel_execution(execution: Execution, *, user: User | AnonymousUser | None) -> bool:
    """Cancel, or ask to cancel, an active execution; False when it had already ended.

    `user` is the person asking (None: the host itself, e.g. a command). `PermissionDenied` for a waiting
    execution whose open set the user may not answer, before anything changes.
    """
    cancelled_by = user if user is not None and user.is_authenticated else None
    with transaction.atomic():
        _lock_descendants(execution.pk)
        locked = Execution.objects.select_for_update().select_related("thread").get(pk=execution.pk)
        if not locked.is_active:
            return False
        waiting = locked.status == ExecutionStatus.WAITING
        if waiting and user is not None and not can_decide(user, execution):
            raise PermissionDenied(f"Cancelling a waiting execution refuses what it waits on. {ANSWER_REFUSED}")
        now = timezone.now()
        changes: dict[str, Any] = {"cancel_requested": True, "cancelled_by": cancelled_by, "cancelled_at": now}
        if waiting:
            changes |= {"status": ExecutionStatus.CANCELLED, "finished_at": now}
            if open_set := pending_requests(locked):
                record_cancellation(locked, open_set, user=cancelled_by)
            # Requests of a set the thread no longer offers can no longer be answered either.
            DeferredRequest.objects.filter(execution_id=locked.pk, status=DeferredStatus.PENDING).update(
                status=DeferredStatus.EXPIRED
            )
        Execution.objects.filter(pk=locked.pk).update(**changes)
        publish_execution_status(locked.pk)
        if waiting:
            answer_parent(locked.pk)
        children = Execution.objects.filter(
            parent_request__execution=locked, status__in=ACTIVE_EXECUTION_STATUSES
        ).order_by("pk")
        for child in children:
            cancel_execution(child, user=user)
    return True


def drop_unseen_request(execution_pk: int, run_pk: int) -> DroppedCancelRequest | None:
    """Inside the transaction that suspends run `run_pk`: drop and record the execution's cancel request that the
    run never saw, so the execution waits without one.

    The row is locked first: a concurrent `cancel_execution` either committed before (its request is dropped
    here) or finds the execution waiting after this commits (and cancelling it then is a decision).
    """
    fields = ("cancel_requested", "cancelled_by", "cancelled_at")
    requested = Execution.objects.select_for_update().only(*fields).get(pk=execution_pk)
    if not requested.cancel_requested:
        return None
    dropped = DroppedCancelRequest.objects.create(
        execution_id=execution_pk,
        run_id=run_pk,
        requested_by_id=requested.cancelled_by_id,
        requested_at=requested.cancelled_at or timezone.now(),
    )
    Execution.objects.filter(pk=execution_pk).update(cancel_requested=False, cancelled_by=None, cancelled_at=None)
    return dropped


def _lock_descendants(execution_pk: int) -> None:
    """Lock the active Host-managed descendants, deepest first: a child that ends locks itself, then its parent,
    so taking the rows in the same order keeps a cascade and a child's end from deadlocking on PostgreSQL."""
    levels: list[list[int]] = []
    frontier = [execution_pk]
    while frontier := list(
        Execution.objects.filter(
            parent_request__execution_id__in=frontier, status__in=ACTIVE_EXECUTION_STATUSES
        ).values_list("pk", flat=True)
    ):
        levels.append(frontier)
    for level in reversed(levels):
        list(Execution.objects.select_for_update().filter(pk__in=level).order_by("pk").values_list("pk", flat=True))
