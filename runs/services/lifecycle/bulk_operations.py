"""Bulk operations: approve, deny (with one reason), cancel or recover many executions, as an RQ job with live
progress.

Starting one checks only its size (at most `HARNESS_BULK_MAX_ITEMS`) and records an item per execution; the job
then acts on each item exactly as the single action would, with the rules of that action at that moment:
approving or denying answers the execution's open set when it is one approval (`group_decisions`, so permission,
stale checkpoint and set completeness are checked there), cancelling obeys `cancellation`, recovering obeys
`failed_recovery` (an execution no longer failed is skipped). Each item is claimed by
one conditional UPDATE before it is acted on, so a job run twice (a retry, a second worker) acts on nothing
twice; a decision's submission key names the operation (`bulk-<operation>-<request>`), and the item rows, with the
operation's user and action, are its audit.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from runs.models import (
    BulkAction,
    BulkItem,
    BulkOperation,
    BulkOutcome,
    DeferredKind,
    Execution,
    ExecutionStatus,
    Verdict,
)

from ..store import access, queueing
from .approvals import can_decide, pending_requests
from .cancellation import cancel_execution
from .failed_recovery import RecoveryRefused, recover_failed
from .group_decisions import Outcome, decide_each

__all__ = ("BulkRefused", "progress", "run", "start")

_VERDICTS = {BulkAction.APPROVE: Verdict.APPROVED, BulkAction.DENY: Verdict.DENIED}


class BulkRefused(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def start(
    user: User | AnonymousUser, action: BulkAction, executions: Sequence[int], *, message: str = ""
) -> BulkOperation:
    """Record the operation and its items and queue its job; `BulkRefused` (nothing recorded) when too large."""
    if isinstance(user, AnonymousUser):
        raise BulkRefused("Log in to act on executions.")
    pks = list(dict.fromkeys(executions))
    if not pks:
        raise BulkRefused("No execution is selected.")
    limit = settings.HARNESS_BULK_MAX_ITEMS
    if len(pks) > limit:
        raise BulkRefused(
            f"{len(pks)} executions are selected; one bulk action acts on at most {limit} (HARNESS_BULK_MAX_ITEMS). "
            "Narrow the filter and act in parts. Nothing was done."
        )
    with transaction.atomic():
        operation = BulkOperation.objects.create(user=user, action=action, message=message)
        BulkItem.objects.bulk_create(BulkItem(operation=operation, execution_id=pk) for pk in pks)
        queueing.enqueue_bulk_operation(operation.pk)
    return operation


def run(operation_pk: int) -> str:
    """The job: act on every item not yet taken, in order."""
    operation = BulkOperation.objects.select_related("user").get(pk=operation_pk)
    user = operation.user
    for item_pk in operation.items.filter(outcome=BulkOutcome.PENDING).values_list("pk", flat=True):
        # The claim: whoever changes it from pending acts on it; nobody else ever does.
        if not BulkItem.objects.filter(pk=item_pk, outcome=BulkOutcome.PENDING).update(outcome=BulkOutcome.TAKEN):
            continue
        item = BulkItem.objects.select_related("execution__thread").get(pk=item_pk)
        outcome, text = _act(operation, user, item.execution) if user is not None else (Outcome.REFUSED, "No user.")
        BulkItem.objects.filter(pk=item_pk).update(outcome=outcome, message=text, finished_at=timezone.now())
    BulkOperation.objects.filter(pk=operation_pk, finished_at__isnull=True).update(finished_at=timezone.now())
    return f"bulk operation {operation_pk} finished"


def _act(operation: BulkOperation, user: User, execution: Execution) -> tuple[str, str]:
    if not access.can(user, access.Action.VIEW, execution):
        return Outcome.REFUSED, "Not among the executions you may see."
    if operation.action == BulkAction.CANCEL:
        return _cancel(user, execution)
    if operation.action == BulkAction.RECOVER:
        return _recover(user, execution)
    if execution.status != ExecutionStatus.WAITING:
        return Outcome.SKIPPED, f"It is {execution.status}, not waiting."
    requests = pending_requests(execution)
    if len(requests) != 1 or requests[0].kind != DeferredKind.APPROVAL:
        return Outcome.SKIPPED, f"It waits on {len(requests)} requests; answer the set on its page."
    verdict = _VERDICTS[BulkAction(operation.action)]
    [result] = decide_each(user, [requests[0].pk], verdict, message=operation.message, key=f"bulk-{operation.pk}")
    return result.outcome, result.message


def _cancel(user: User, execution: Execution) -> tuple[str, str]:
    if not execution.is_active:
        return Outcome.SKIPPED, f"It is already {execution.status}."
    waiting = execution.status == ExecutionStatus.WAITING
    if not access.can(user, access.Action.CANCEL, execution) or (waiting and not can_decide(user, execution)):
        return Outcome.REFUSED, "Your role in this team does not allow cancelling it."
    try:
        cancelled = cancel_execution(execution, user=user)
    except PermissionDenied:
        # It began to wait since it was read: cancelling it is now an approver's decision.
        return Outcome.REFUSED, "Your role in this team does not allow cancelling it."
    if cancelled:
        return Outcome.DONE, "cancelled." if waiting else "cancellation requested."
    return Outcome.SKIPPED, "It ended before it could be cancelled."


def _recover(user: User, execution: Execution) -> tuple[str, str]:
    try:
        run = recover_failed(execution, user=user)
    except PermissionDenied as refused:
        return Outcome.REFUSED, str(refused)
    except RecoveryRefused as refused:
        return Outcome.SKIPPED, str(refused)
    if run is None:
        execution.refresh_from_db(fields=["status"])
        return Outcome.SKIPPED, f"It is {execution.status}, not failed."
    return Outcome.DONE, f"recovery run {run.number} queued."


def progress(operation: BulkOperation) -> dict[str, int]:
    """How many items have each outcome (pending and taken ones included)."""
    counts = dict(operation.items.order_by().values_list("outcome").annotate(n=Count("pk")))
    return {outcome: counts.get(outcome, 0) for outcome in BulkOutcome.values}
