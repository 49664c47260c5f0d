"""What-if forks: a fork of one of an execution's checkpoints that changes exactly one thing and runs at once.

The change (`store.what_if`) is checked against the checkpoint and the Host before anything is written: the call
it names must be there (with a result, or awaiting approval), an edited argument or result must validate against
the tool's own schema, a model must be one this Host can run, a policy version must be the team's. The fork is then
a new thread (`fork_thread`, the history edited for a result or an argument) with one execution marked "what-if of
#N", queued for the worker like any other. It continues its original's turn: its input is already in the history.

Nothing with a side effect runs in a what-if until an operator says so: each of its runs defers every call of a
tool not declared safe to run again to approval (`store.agents.side_effect_guard`), and its first run re-dispatches
the checkpoint's open calls (tool recovery `always`), so they are asked for again rather than run or dropped. An
operator promotes the fork by approving them through the normal approval flow.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from pydantic import TypeAdapter, ValidationError
from pydantic_ai import ModelMessage, ModelRequest, ModelResponse, ToolCallPart, ToolDenied, ToolReturnPart

from runs.harness import DeferredToolResume, HarnessState, PendingDeferredCalls
from runs.models import (
    Checkpoint,
    DeferredKind,
    DeferredRequest,
    Execution,
    ExecutionTrigger,
    HostPolicyVersion,
    RunReason,
    ToolRecovery,
    Verdict,
)

from ..store import checkpoints, toolbox
from ..store.providers import model_problems
from ..store.what_if import (
    ApprovalChange,
    ArgumentsChange,
    InstructionsChange,
    ModelChange,
    PolicyVersionChange,
    ToolResultChange,
    WhatIfChange,
    WhatIfRefused,
    describe,
    model_choice,
)
from ..timeline.publishing import publish_execution_status
from .approvals import SubmissionRejected, check_tool_args, suspended_requests
from .executions import new_run
from .forks import fork_thread

__all__ = ("MAX_OFFERED", "WhatIfRefused", "describe", "start_points", "start_what_if")

MAX_OFFERED = 200
_BOUNDARY_LABELS = {"model_request": "before a model request", "tool_execution": "before a tool call"}

_History = Callable[[HarnessState], HarnessState]


@dataclass(frozen=True)
class _Plan:
    """What the change does to the fork: its history, its policy version, the answers its first run starts with."""

    edit: _History | None = None
    version: HostPolicyVersion | None = None
    resume: DeferredToolResume | None = None


def start_points(execution: Execution) -> list[tuple[int, str]]:
    """The checkpoints of `execution` a what-if may go on from (the latest `MAX_OFFERED`), as (pk, label): where
    each was taken and, at a suspension, the calls that awaited an answer there. Read from rows alone, since the
    execution's page offers them on every view."""
    rows = list(
        Checkpoint.objects.filter(run__execution=execution)
        .select_related("run")
        .only("pk", "kind", "metadata", "run__number")
        .order_by("-pk")[:MAX_OFFERED]
    )
    awaiting: dict[int, list[str]] = {}
    for checkpoint_pk, call, tool in DeferredRequest.objects.filter(checkpoint__in=rows).values_list(
        "checkpoint_id", "tool_call_id", "tool_name"
    ):
        awaiting.setdefault(checkpoint_pk, []).append(f"{tool} {call}")
    offered = []
    for row in reversed(rows):
        assert row.run is not None, "filtered by their run's execution"
        where = _BOUNDARY_LABELS.get(row.metadata.get("boundary", ""), row.kind)
        calls = f"; awaiting {', '.join(awaiting[row.pk])}" if row.pk in awaiting else ""
        offered.append((row.pk, f"#{row.pk}: run {row.run.number}, {where}{calls}"))
    return offered


def start_what_if(checkpoint: Checkpoint, change: WhatIfChange, *, user: Any = None) -> Execution:
    """The what-if fork of `checkpoint` with `change`, queued; `WhatIfRefused` (nothing written) if it cannot be."""
    run = checkpoint.run
    if run is None:
        raise WhatIfRefused("A what-if goes on from a checkpoint of one of an execution's runs; this one has no run.")
    original = run.execution
    try:
        state = checkpoints.load(checkpoint)
    except checkpoints.CheckpointError as exc:
        raise WhatIfRefused(f"The checkpoint cannot be read: {exc}") from None
    plan = _plan(change, checkpoint, state, original)
    with transaction.atomic():
        try:
            thread = fork_thread(
                checkpoint, title=f"What-if of #{original.pk}: {change.describe()}", user=user, edit=plan.edit
            )
        except checkpoints.CheckpointError as exc:
            raise WhatIfRefused(str(exc)) from None
        version = plan.version or original.policy_version
        execution = Execution.objects.create(
            thread=thread,
            number=1,
            input=original.input,
            shown_input=original.shown_input,
            trigger=ExecutionTrigger.FORK,
            policy_version=version,
            created_by=user if getattr(user, "is_authenticated", False) else None,
            what_if_of=original,
            what_if=change.model_dump(mode="json"),
        )
        new_run(
            execution,
            reason=RunReason.INITIAL,
            start_checkpoint=thread.selected_checkpoint,
            deferred_resume=plan.resume,
            tool_recovery=ToolRecovery.ALWAYS,
        )
        publish_execution_status(execution.pk)
    return execution


def _plan(change: WhatIfChange, checkpoint: Checkpoint, state: HarnessState, original: Execution) -> _Plan:
    match change:
        case ToolResultChange():
            return _Plan(edit=_new_result(change, state))
        case ArgumentsChange():
            return _Plan(edit=_new_arguments(change, checkpoint, state))
        case ApprovalChange():
            return _Plan(resume=_new_verdict(change, checkpoint))
        case InstructionsChange():
            if change.instructions == (original.thread.profile.instructions or ""):
                raise WhatIfRefused("These are the profile's instructions as they are: nothing would change.")
            return _Plan()
        case ModelChange():
            profile = original.thread.profile
            problems = model_problems(model_choice(change, profile.base_url, profile.name))
            if problems:
                raise WhatIfRefused(f"The model {change.model!r} cannot run on this Host: {' '.join(problems)}")
            return _Plan()
        case PolicyVersionChange():
            return _Plan(version=_policy_version(change, original))
    raise AssertionError(change)  # the union above is closed


def _policy_version(change: PolicyVersionChange, original: Execution) -> HostPolicyVersion:
    policy = original.policy_version.policy
    version = HostPolicyVersion.objects.filter(policy=policy, number=change.number).first()
    if version is None:
        raise WhatIfRefused(f"The policy {policy} has no version {change.number}.")
    if version.pk == original.policy_version_id:
        raise WhatIfRefused(f"The execution ran under policy version {change.number} already: nothing would change.")
    return version


def _new_result(change: ToolResultChange, state: HarnessState) -> _History:
    part = next(
        (
            part
            for message in state.message_history
            if isinstance(message, ModelRequest)
            for part in message.parts
            if isinstance(part, ToolReturnPart) and part.tool_call_id == change.tool_call_id
        ),
        None,
    )
    if part is None:
        raise WhatIfRefused(
            f"Call {change.tool_call_id} has no result at this checkpoint; pick a checkpoint after the call returned."
        )
    _check_result(part.tool_name, change.result)

    def edit(forked: HarnessState) -> HarnessState:
        def replaced(message: ModelMessage) -> ModelMessage:
            if not isinstance(message, ModelRequest):
                return message
            parts = [
                _with_content(item, change.result)
                if isinstance(item, ToolReturnPart) and item.tool_call_id == change.tool_call_id
                else item
                for item in message.parts
            ]
            return dataclasses.replace(message, parts=parts)

        return forked.with_changes(message_history=[replaced(message) for message in forked.message_history])

    return edit


# Typed loosely: pydantic-ai's narrower parts (tool search, capabilities) fix the types of their content and args.
def _with_content(part: Any, content: Any) -> Any:
    return dataclasses.replace(part, content=content)


def _with_args(part: Any, args: dict[str, Any]) -> Any:
    return dataclasses.replace(part, args=dict(args))


def _check_result(tool_name: str, result: Any) -> None:
    """A result must be what the tool's function could have returned (its return annotation, when it has one)."""
    tool = toolbox.get_tool(tool_name)
    if tool is None:
        raise WhatIfRefused(f"The tool {tool_name!r} no longer exists on this Host; its result cannot be checked.")
    try:
        returns = typing.get_type_hints(tool.function).get("return", Any)
    except (NameError, TypeError):
        returns = Any
    try:
        TypeAdapter(returns).validate_python(result)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or 'result'}: {error['msg']}" for error in exc.errors()
        )
        raise WhatIfRefused(f"The result does not fit what {tool_name} returns: {problems}.") from None


def _awaiting(checkpoint: Checkpoint, tool_call_id: str) -> DeferredRequest:
    request = (
        DeferredRequest.objects.filter(checkpoint=checkpoint, tool_call_id=tool_call_id, kind=DeferredKind.APPROVAL)
        .select_related("decision")
        .first()
    )
    if request is None:
        raise WhatIfRefused(
            f"Call {tool_call_id} did not await approval at this checkpoint; pick the checkpoint its run suspended at."
        )
    return request


def _new_arguments(change: ArgumentsChange, checkpoint: Checkpoint, state: HarnessState) -> _History:
    request = _awaiting(checkpoint, change.tool_call_id)
    if change.args == request.args:
        raise WhatIfRefused("These are the call's arguments as they were: nothing would change.")
    problems = check_tool_args(request.tool_name, change.args)
    if problems:
        raise WhatIfRefused(f"The arguments do not validate against {request.tool_name}: {'; '.join(problems)}.")
    last = state.message_history[-1] if state.message_history else None
    if not isinstance(last, ModelResponse) or change.tool_call_id not in {c.tool_call_id for c in last.tool_calls}:
        raise WhatIfRefused(
            f"Call {change.tool_call_id} was forwarded by another call; its arguments cannot be edited."
        )

    def edit(forked: HarnessState) -> HarnessState:
        *before, response = forked.message_history
        assert isinstance(response, ModelResponse)
        parts = [
            _with_args(part, change.args)
            if isinstance(part, ToolCallPart) and part.tool_call_id == change.tool_call_id
            else part
            for part in response.parts
        ]
        return forked.with_changes(message_history=[*before, dataclasses.replace(response, parts=parts)])

    return edit


def _new_verdict(change: ApprovalChange, checkpoint: Checkpoint) -> DeferredToolResume | None:
    request = _awaiting(checkpoint, change.tool_call_id)
    recorded: Verdict | None = getattr(getattr(request, "decision", None), "verdict", None)
    was = None if recorded is None else ("approve" if recorded == Verdict.APPROVED else "deny")
    if was == change.verdict:
        raise WhatIfRefused(f"Call {change.tool_call_id} was {recorded} already: nothing would change.")
    if change.verdict == "approve":
        # An approval is a side effect's go-ahead: the fork asks for it again, and an operator gives it.
        return None
    try:
        deferred = suspended_requests(request.run_id)
    except SubmissionRejected as exc:
        raise WhatIfRefused(exc.message) from None
    entries = [entry for entry in deferred.approvals if entry.target_call.tool_call_id == change.tool_call_id]
    if not entries:
        raise WhatIfRefused(f"Call {change.tool_call_id} is not among the approvals its run suspended with.")
    denied = PendingDeferredCalls(
        approvals=entries,
        metadata={key: value for key, value in deferred.metadata.items() if key == change.tool_call_id},
    )
    results = denied.build_results(approvals={change.tool_call_id: ToolDenied(change.message or ToolDenied().message)})
    # A batch that answers part of the open calls: the others are asked for again (`recovery`, see the module).
    return DeferredToolResume(denied, results, recovery=True)
