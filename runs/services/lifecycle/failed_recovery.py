"""Recovering a failed execution: an operator starts the recovery run the sweeper starts after a lost worker.

The run continues from the execution's latest continuation checkpoint (`recovery_point`), with the accepted input
history may still lack marked `recovery=True`, so the interrupted tool call is settled by the policy's tool
recovery mode. Only the thread's latest execution is recovered (a later one already continued the thread), and
only one that is really the thread's own work: a replay, a Host-managed child (whose parent was answered when it
failed) and an imported copy are refused. The execution is queued again and its failure cleared (the failed run
keeps it); the execution's page then says "recovered by run N".
"""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import PermissionDenied
from django.db import transaction

from runs.harness import DeferredToolResume, decode_resume
from runs.models import Checkpoint, CheckpointKind, Execution, ExecutionStatus, Run, RunReason, Thread

from ..store import access, checkpoints
from ..store.host_events import HostEvent, announce
from ..timeline.publishing import publish_execution_status
from .executions import new_run

__all__ = ("RecoveryRefused", "recover_failed", "recovery_point", "start_recovery_run")


class RecoveryRefused(Exception):
    """The execution is failed but cannot be recovered; the message says why."""


def recovery_point(execution: Execution, dead: Run) -> tuple[Checkpoint | None, DeferredToolResume | None]:
    """The latest continuation checkpoint of the execution and the accepted input history may still lack."""
    latest = (
        Checkpoint.objects.filter(run__execution=execution, kind__in=(CheckpointKind.BOUNDARY, CheckpointKind.TERMINAL))
        .order_by("-pk")
        .first()
    )
    if latest is not None and latest.run_id == dead.pk:
        return latest, checkpoints.pending_input(latest)
    # The dead run stored no checkpoint of its own: it restarts from where it started, with its own input.
    start = latest if latest is not None else dead.start_checkpoint
    accepted = None if dead.deferred_resume is None else decode_resume(dead.deferred_resume, recovery=True)
    return start, accepted


def recover_failed(execution: Execution, *, user: User | AnonymousUser) -> Run | None:
    """Start the recovery run of a failed execution; None when it is no longer failed (nothing is done).

    `PermissionDenied` without the role, `RecoveryRefused` for a failed execution that cannot be recovered."""
    if not access.can(user, access.Action.RECOVER, execution):
        raise PermissionDenied("Your role in this team does not allow recovering it.")
    with transaction.atomic():
        # The thread's row first, as starting an execution locks it: no execution starts on it meanwhile.
        thread = Thread.objects.select_for_update().get(pk=execution.thread_id)
        locked = Execution.objects.select_for_update(of=("self",)).select_related("policy_version")
        execution = locked.get(pk=execution.pk)
        execution.thread = thread
        if execution.status != ExecutionStatus.FAILED:
            return None
        _refuse_unless_recoverable(execution, thread)
        dead = execution.runs.order_by("-number").first()
        if dead is None:
            raise RecoveryRefused("It failed before any run started; start it again instead.")
        Execution.objects.filter(pk=execution.pk).update(
            status=ExecutionStatus.QUEUED, finished_at=None, failure_code="", failure_message=""
        )
        return start_recovery_run(execution, dead)


def start_recovery_run(execution: Execution, dead: Run) -> Run:
    """Inside a transaction holding the execution's row: its recovery run after `dead`, from the recovery point,
    announced; the sweeper's after a lost worker and an operator's after a failure alike."""
    start, accepted = recovery_point(execution, dead)
    run = new_run(
        execution,
        reason=RunReason.RECOVERY,
        previous=dead,
        attempt=dead.attempt + 1,
        start_checkpoint=start,
        deferred_resume=accepted,
    )
    publish_execution_status(execution.pk)
    announce(HostEvent.EXECUTION_RECOVERED, execution=execution.pk, run=run.pk)
    return run


def _refuse_unless_recoverable(execution: Execution, thread: Thread) -> None:
    if thread.imported_by_id is not None:
        raise RecoveryRefused("Its thread is an imported copy; nothing runs on it.")
    if execution.replay_of_id is not None:
        raise RecoveryRefused("It is a replay; replay the recording again instead.")
    if execution.parent_request_id is not None:
        raise RecoveryRefused("It is a child execution; its parent already received its failure.")
    if thread.executions.filter(number__gt=execution.number).exists():
        raise RecoveryRefused("A later execution continued its thread; only the thread's latest one is recovered.")
