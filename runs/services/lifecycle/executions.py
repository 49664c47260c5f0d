"""Starting and resuming executions; each new Run's job is sent to RQ after the commit (`queueing`); cancelling:
cancellation.py."""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Max

from runs.harness import DeferredToolResume, HarnessState, encode_resume, new_thread_id
from runs.models import (
    ACTIVE_EXECUTION_STATUSES,
    DEFAULT_TEAM,
    AgentProfile,
    Checkpoint,
    CheckpointKind,
    DeferredRequest,
    Execution,
    ExecutionStatus,
    ExecutionTrigger,
    HostPolicy,
    HostPolicyVersion,
    Run,
    RunReason,
    Team,
    Thread,
    ToolRecovery,
)

from ..store import checkpoints
from ..store.agents import profile_snapshot
from ..store.policy import publish_policy_version
from ..store.queueing import enqueue_run
from ..store.what_if import applied_to_snapshot
from ..timeline.publishing import publish_execution_status
from ..timeline.redaction import redactor_for

__all__ = (
    "ExecutionBusy",
    "ReadOnlyThread",
    "create_thread",
    "current_policy_version",
    "masked_title",
    "new_run",
    "resume_execution",
    "start_execution",
)


class ExecutionBusy(RuntimeError):
    """The thread already has an active execution (queued, running, waiting or recovering)."""


class ReadOnlyThread(RuntimeError):
    """The thread is a copy imported from a run bundle: it is read, never continued (fork it instead)."""


def current_policy_version(team: Team | int | None = None) -> HostPolicyVersion:
    """The current version of `team`'s policy (of the team `default` if None), created with safe defaults on
    first use: a team's policy governs every execution on its profiles."""
    if team is None:
        team = Team.objects.get_or_create(name=DEFAULT_TEAM)[0]
    elif isinstance(team, int):
        team = Team.objects.get(pk=team)
    policy = HostPolicy.objects.filter(team=team).first()
    if policy is None:
        policy, _ = HostPolicy.objects.get_or_create(team=team, defaults={"name": team.name})
    if policy.current_version is None:
        return publish_policy_version(policy, created_by=None, comment="initial defaults")
    return policy.current_version


def masked_title(title: str, team: Team | int) -> str:
    """A thread title as it is stored and shown: masked by the current version of its team's policy. Titles are
    often the start of a prompt (AG-UI, `harness_run`) or a child's task, and every page and the search show them
    as stored."""
    return redactor_for(current_policy_version(team)).text(title)


def create_thread(
    profile: AgentProfile, *, title: str = "", thread_id: str | None = None, team: Team | None = None
) -> Thread:
    """A new Thread whose selected checkpoint is an empty initial state, in `team` (default: the profile's)."""
    team_pk = team.pk if team is not None else profile.team_id
    with transaction.atomic():
        thread = Thread.objects.create(
            thread_id=thread_id or new_thread_id(),
            title=masked_title(title, team_pk),
            profile=profile,
            team_id=team_pk,
        )
        initial = checkpoints.create(thread, HarnessState.new(thread_id=thread.thread_id), kind=CheckpointKind.INITIAL)
        thread.selected_checkpoint = initial
        thread.save(update_fields=["selected_checkpoint"])
    return thread


def new_run(
    execution: Execution,
    *,
    reason: RunReason,
    previous: Run | None = None,
    attempt: int = 1,
    start_checkpoint: Any = None,
    deferred_resume: DeferredToolResume | None = None,
    tool_recovery: ToolRecovery | None = None,
) -> Run:
    """Inside a transaction: the execution's next Run, frozen to its policy version and profile (as a what-if
    changed it); its job is sent after the commit. `tool_recovery`: instead of the policy's."""
    number = (execution.runs.aggregate(last=Max("number"))["last"] or 0) + 1
    policy_version = execution.policy_version
    run = Run.objects.create(
        execution=execution,
        number=number,
        reason=reason,
        previous_run=previous,
        attempt=attempt,
        tool_recovery=tool_recovery or policy_version.tool_recovery,
        policy_version=policy_version,
        profile_snapshot=applied_to_snapshot(profile_snapshot(execution.thread.profile), execution.what_if),
        start_checkpoint=start_checkpoint,
        deferred_resume=None if deferred_resume is None else encode_resume(deferred_resume),
    )
    enqueue_run(run)
    return run


def start_execution(
    thread: Thread,
    input: str,
    *,
    user: Any = None,
    trigger: ExecutionTrigger = ExecutionTrigger.MANUAL,
    parent_request: DeferredRequest | None = None,
) -> Execution:
    """Create an Execution and its first Run on the thread's selected checkpoint, and enqueue it.

    `parent_request`: the request of a suspended run this execution answers as a Host-managed child."""
    try:
        with transaction.atomic():
            thread = Thread.objects.select_for_update().get(pk=thread.pk)
            if thread.imported_by_id is not None:
                raise ReadOnlyThread(f"thread {thread.thread_id} is an imported copy; no execution starts on it")
            number = (thread.executions.aggregate(last=Max("number"))["last"] or 0) + 1
            version = current_policy_version(thread.profile.team_id)
            execution = Execution.objects.create(
                thread=thread,
                number=number,
                input=input,
                shown_input=redactor_for(version).text(input),
                trigger=trigger,
                policy_version=version,
                created_by=user if getattr(user, "is_authenticated", False) else None,
                parent_request=parent_request,
            )
            new_run(execution, reason=RunReason.INITIAL, start_checkpoint=thread.selected_checkpoint)
            publish_execution_status(execution.pk)
    except IntegrityError as exc:
        if thread.executions.filter(status__in=ACTIVE_EXECUTION_STATUSES).exists():
            raise ExecutionBusy(f"thread {thread.thread_id} already has an active execution") from exc
        raise
    return execution


def resume_execution(execution: Execution, resume: DeferredToolResume) -> Run:
    """Inside the caller's transaction: a resume Run of a waiting execution with the accepted answers."""
    suspended = execution.runs.order_by("-number").first()
    # The resume continues exactly the state the suspended run ended with (not whatever a caller's stale
    # thread object points at).
    terminal = Checkpoint.objects.filter(run=suspended, kind=CheckpointKind.TERMINAL).order_by("-pk").first()
    execution.status = ExecutionStatus.QUEUED
    execution.save(update_fields=["status"])
    run = new_run(
        execution,
        reason=RunReason.RESUME,
        previous=suspended,
        start_checkpoint=terminal,
        deferred_resume=resume,
    )
    publish_execution_status(execution.pk)
    return run
