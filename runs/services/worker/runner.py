"""The worker side of a Run: lease, stream, journal + projection, checkpoints, heartbeat and the result.

`aexecute_run` is what the RQ job awaits. It takes the run's lease (or does nothing if the run is not queued),
rebuilds the agent from the run's frozen profile and policy, opens the stream on the run's start checkpoint
and writes every item to the journal and the timeline in small transactions. At each boundary the stream is
held (see `boundaries`) while the checkpoint is stored. A heartbeat renews the lease and passes on an
operator's cancel; one it has not passed on when the run suspends is dropped (see `cancellation`). Every write
re-checks the lease, so a worker that lost it stops without changing anything.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any, cast

from asgiref.sync import async_to_sync, sync_to_async
from django.db import transaction
from django.utils import timezone
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelResponse
from pydantic_ai.usage import RunUsage

from runs.harness import (
    OVER_BUDGET_TOOL,
    BudgetCapability,
    BudgetCheck,
    CheckpointBoundaries,
    DeferredToolCall,
    DeferredToolResume,
    ExecutableAgent,
    HarnessError,
    HarnessRunResult,
    HarnessRunResultEvent,
    HarnessState,
    OverBudget,
    PendingDispatch,
    RunBindings,
    SafeFailure,
    ToolRecoveryMode,
    boundary_of,
    decode_resume,
)
from runs.models import (
    CheckpointKind,
    DeferredKind,
    DeferredRequest,
    Execution,
    ExecutionStatus,
    Run,
    RunReason,
    RunStatus,
    ToolDispatch,
)

from ..lifecycle.cancellation import drop_unseen_request
from ..lifecycle.children import answer_parent, start_children
from ..reports import budget_usage
from ..store import checkpoints, leases
from ..store.agents import build_executable, run_rules
from ..store.host_events import HostEvent, announce
from ..store.leases import Lease, LeaseLost
from ..store.policy import approval_reason, expiry_for
from ..timeline.lane_closing import OpenLane, aclose_projection
from ..timeline.projection import RunProjection
from ..timeline.publishing import publish_approvals_changed, publish_execution_status, worker_sender
from . import loop_lag, telemetry
from .batching import BatchWriter
from .commit_group import CommitGroup

__all__ = ("AgentBuilder", "BoundaryHook", "aexecute_run", "execute_run")

log = logging.getLogger(__name__)


# Called after each boundary checkpoint is stored, before the run goes on: a caller's way to watch or stop a
# run at its durable points (the demo command simulates a crash with one).
BoundaryHook = Callable[[], None]

# Builds a run's agent with the worker's capabilities added: `build_executable` unless a caller (a replay) brings
# its own model and tools.
AgentBuilder = Callable[[Run, list[AbstractCapability[Any]]], ExecutableAgent[Any]]


def _from_profile(run: Run, capabilities: list[AbstractCapability[Any]]) -> ExecutableAgent[Any]:
    # Only a run on its profile's model spends: a replay (its own builder) answers from a recording.
    budget = [BudgetCapability(check=_budget_check(run))] if budget_usage.rules_of(run) else []
    return build_executable(run, extra_capabilities=[*capabilities, *budget])


def _budget_check(run: Run) -> BudgetCheck:
    async def check(usage: RunUsage) -> OverBudget | None:
        return await sync_to_async(budget_usage.first_spent_budget)(run, usage)

    return check


@dataclass(frozen=True, slots=True)
class _Start:
    state: HarnessState
    input: str | None
    resume: DeferredToolResume | None
    chain: checkpoints.CheckpointChain


# In the worker, lease renewals have a thread (and database connection) of their own: behind the journal writes of
# every run on its loop they could come too late and lose a lease that is being used.
LEASE_RENEWALS = ThreadPoolExecutor(1, thread_name_prefix="lease-heartbeat")


def execute_run(run_pk: int, *, after_boundary: BoundaryHook | None = None, build: AgentBuilder = _from_profile) -> str:
    """`aexecute_run` for a caller without an event loop (the demo command, a replay, tests). Its one run renews
    its lease on the caller's own thread and connection, so it also works inside the caller's transaction."""
    return async_to_sync(aexecute_run)(run_pk, after_boundary=after_boundary, build=build, heartbeats=None)


async def aexecute_run(
    run_pk: int,
    *,
    after_boundary: BoundaryHook | None = None,
    build: AgentBuilder = _from_profile,
    heartbeats: ThreadPoolExecutor | None = LEASE_RENEWALS,
) -> str:
    """Run a queued Run to its end; returns a short outcome for the RQ job's result.

    Many of these share one event loop in the worker (runs/worker/): everything blocking runs in threads.
    `after_boundary` is called after each boundary checkpoint is stored. What it raises ends the run loop
    (a `BaseException` passes through, leaving the lease to expire as a killed worker would). `build` makes the
    agent from the run (a replay answers from a recording instead of the profile's model).
    """
    # The sender is in place before the lease is taken: the execution's new status then waits for the worker's
    # publishing task instead of holding up the database thread that every run on this loop shares.
    async with worker_sender():
        lease = await sync_to_async(_acquire)(run_pk)
        if lease is None:
            return "skipped: the run is not queued"
        try:
            return await _drive(run_pk, lease, after_boundary, build, heartbeats)
        except LeaseLost as exc:
            log.warning("%s", exc)
            return "stopped: lease lost"
        except asyncio.CancelledError:
            # The worker is stopping (or the job ran out of time): what was streamed is written (the writer's
            # close), and the sweeper's next pass recovers the run instead of waiting for the lease to expire.
            await sync_to_async(leases.give_up)([lease])
            raise


def _acquire(run_pk: int) -> Lease | None:
    """The run's lease, and its execution's status (running now) sent once that commits."""
    lease = leases.acquire(run_pk)
    if lease is not None:
        # After the lease's own transaction: at once, or when the caller's commits.
        publish_execution_status(lease.execution_pk)
    return lease


def _load(run_pk: int) -> tuple[Run, _Start, RunProjection]:
    """The run, what it starts from, and its projection with what that reads (the journal cursor, the last
    position): one hop to the database thread, where every run on the loop queues behind the others' writes."""
    run = Run.objects.select_related(
        "execution__thread__profile", "execution__created_by", "policy_version", "start_checkpoint__run"
    ).get(pk=run_pk)
    thread = run.execution.thread
    start = run.start_checkpoint
    if start is None:
        state, tip = HarnessState.new(thread_id=thread.thread_id), None
    else:
        state, tip = checkpoints.load_chain(start)
    # The execution's input is already in history once any checkpoint of this execution exists, and in a what-if
    # fork's, which goes on from a checkpoint of its original's turn.
    continued = start is not None and start.run is not None and start.run.execution_id == run.execution_id
    what_if = run.execution.what_if is not None
    text = None if run.reason == RunReason.RESUME or continued or what_if else run.execution.input
    resume = None if run.deferred_resume is None else decode_resume(run.deferred_resume)
    projection = RunProjection(run)
    projection.load()
    return run, _Start(state=state, input=text, resume=resume, chain=checkpoints.CheckpointChain(tip)), projection


def _bind_run_id(lease: Lease, run_id: str) -> None:
    with transaction.atomic():
        leases.verify(lease, "record the harness run id")
        Run.objects.filter(pk=lease.run_pk).update(run_id=run_id)
        publish_execution_status(lease.execution_pk)


def _heartbeat_once(lease: Lease) -> bool:
    """Renew the lease; True when an operator asked to cancel the execution."""
    leases.renew(lease)
    return Execution.objects.filter(pk=lease.execution_pk, cancel_requested=True).exists()


class _CancelSwitch:
    """Cancels the stream once it exists; a cancel that came earlier is applied when it is attached."""

    def __init__(self) -> None:
        self._target: Callable[[], None] | None = None
        self._requested = False

    def attach(self, target: Callable[[], None]) -> None:
        self._target = target
        if self._requested:
            target()

    def __call__(self) -> None:
        self._requested = True
        if self._target is not None:
            self._target()


async def _heartbeat(lease: Lease, cancel: _CancelSwitch, heartbeats: ThreadPoolExecutor | None) -> None:
    interval = max(lease.seconds / 3, 0.2)
    loop = asyncio.get_running_loop()
    while True:
        asleep_at = loop.time()
        await asyncio.sleep(interval)
        loop_lag.note(loop.time() - asleep_at - interval, run_pk=lease.run_pk)
        try:
            if heartbeats is None:
                cancel_requested = await sync_to_async(_heartbeat_once)(lease)
            else:
                cancel_requested = await sync_to_async(_heartbeat_once, thread_sensitive=False, executor=heartbeats)(
                    lease
                )
        except LeaseLost:
            # Stop producing; whatever the stream still yields is refused by the lease checks.
            cancel()
            return
        if cancel_requested:
            cancel()


async def _drive(
    run_pk: int,
    lease: Lease,
    after_boundary: BoundaryHook | None,
    build: AgentBuilder,
    heartbeats: ThreadPoolExecutor | None,
) -> str:
    # The heartbeat starts before anything slow (loading, building the agent) so the lease never lapses.
    cancel = _CancelSwitch()
    heartbeat = asyncio.create_task(_heartbeat(lease, cancel, heartbeats))
    try:
        return await _work(run_pk, lease, after_boundary, cancel, build)
    finally:
        heartbeat.cancel()


async def _work(
    run_pk: int, lease: Lease, after_boundary: BoundaryHook | None, cancel: _CancelSwitch, build: AgentBuilder
) -> str:
    try:
        run, start, projection = await sync_to_async(_load)(run_pk)
    except checkpoints.CheckpointError as exc:
        await sync_to_async(_record_failure)(lease, "checkpoint_invalid", str(exc))
        return "failed: checkpoint invalid"

    gate = CheckpointBoundaries()
    try:
        executable = build(run, [gate, *telemetry.run_capabilities()])
        stream = executable.stream(
            start.input,
            bindings=RunBindings(),
            previous_state=start.state,
            # The column holds only `ToolRecovery` values, which are the engine's modes.
            tool_recovery=cast(ToolRecoveryMode, run.tool_recovery),
            deferred_resume=start.resume,
        )
    except (HarnessError, LookupError, ValueError) as exc:
        code = exc.code if isinstance(exc, HarnessError) else "run_invalid"
        await sync_to_async(_record_failure)(lease, code, str(exc))
        return f"failed: {code}"
    gate.bind(stream.run_id)
    await CommitGroup.of_running_loop().write(partial(_bind_run_id, lease, stream.run_id))
    run.run_id = stream.run_id
    # What the items written say about ending the lane, should the stream break off (see the end).
    lane = OpenLane(run, projection.observer)
    cancel.attach(stream.cancel)
    writer = BatchWriter(projection, lease)

    terminal: HarnessRunResultEvent[Any] | None = None
    try:
        with telemetry.traced(run):
            async with stream:
                async for item in stream:
                    if isinstance(item, HarnessRunResultEvent):
                        # Journaled together with the outcome it carries, see BatchWriter.finish.
                        terminal = item
                        continue
                    await writer.add(item)
                    lane.note(item)
                    boundary = boundary_of(item, stream.run_id)
                    if boundary is not None:
                        state = await stream.export_state()
                        await writer.checkpoint(
                            partial(
                                _record_boundary,
                                run,
                                state,
                                lease=lease,
                                pending=stream.pending_deferred_input,
                                boundary=boundary,
                                chain=start.chain,
                                dispatch=gate.next_dispatch(),
                            )
                        )
                        if after_boundary is not None:
                            after_boundary()
                        gate.release()
    except LeaseLost:
        raise
    except HarnessError as exc:
        failure = SafeFailure(code=exc.code, message=str(exc), retry_hint=exc.retry_hint)
    except Exception as exc:
        log.exception("run %s failed in the host", run_pk)
        message = f"The run stopped on an internal error ({type(exc).__name__})."
        failure = SafeFailure(code="host_error", message=message)
    else:
        assert terminal is not None, "a stream that ends cleanly delivers its result item"
        result = terminal.result
        await writer.finish(terminal, lambda last_index: _record_result(run, lease, result, last_index, start.chain))
        return result.status
    finally:
        await writer.close()
    # The stream ended without its terminal item. What it yielded before is still its history (unless the
    # writer itself is what failed); then the run fails and its lane is ended as a failed run's would be: by the
    # run's own observer, unless a failed write left it ahead of the database (then from the journal).
    with contextlib.suppress(Exception):
        await writer.flush()
    await sync_to_async(_record_failure)(lease, failure.code, failure.message)
    await aclose_projection(run, failure, None if writer.failed else lane)
    return f"failed: {failure.code}"


def _record_boundary(
    run: Run,
    state: HarnessState,
    last_index: int,
    *,
    lease: Lease,
    pending: DeferredToolResume | None,
    boundary: str,
    chain: checkpoints.CheckpointChain,
    dispatch: PendingDispatch | None,
) -> None:
    """The boundary's checkpoint and, at a tool's boundary, the dispatch in the ledger: both durable before the
    tool starts, in one transaction (the caller's)."""
    checkpoints.record(
        run,
        state,
        lease=lease,
        kind=CheckpointKind.BOUNDARY,
        journal_index=last_index,
        pending=pending,
        metadata={"boundary": boundary},
        chain=chain,
    )
    if dispatch is not None:
        ToolDispatch.objects.create(
            run_id=lease.run_pk,
            tool_call_id=dispatch.call.tool_call_id,
            tool_name=dispatch.call.tool_name,
            recovery_retryable=dispatch.recovery_retryable,
            args=dispatch.call.args_as_dict(),
        )


_ANNOUNCED_ENDS = {
    ExecutionStatus.COMPLETED: HostEvent.EXECUTION_COMPLETED,
    ExecutionStatus.FAILED: HostEvent.EXECUTION_FAILED,
}


def _finish_execution(lease: Lease, status: ExecutionStatus, *, child: bool = True, **fields: Any) -> None:
    """End the lease's execution with `status`; `child=False` when the caller knows it has no parent to answer."""
    finished = {} if status == ExecutionStatus.WAITING else {"finished_at": timezone.now()}
    Execution.objects.filter(pk=lease.execution_pk).update(status=status, **finished, **fields)
    publish_execution_status(lease.execution_pk)
    if status in _ANNOUNCED_ENDS:
        announce(_ANNOUNCED_ENDS[status], execution=lease.execution_pk)
    if status != ExecutionStatus.WAITING and child:
        answer_parent(lease.execution_pk)


def _record_failure(lease: Lease, code: str, message: str) -> None:
    with transaction.atomic():
        leases.release(lease, RunStatus.FAILED, failure_code=code, failure_message=message)
        _finish_execution(lease, ExecutionStatus.FAILED, failure_code=code, failure_message=message)


def _deferred_requests(run: Run, result: HarnessRunResult[Any], checkpoint: Any) -> list[DeferredRequest]:
    deferred = result.deferred
    assert deferred is not None
    now = timezone.now()
    policy_version = run.policy_version
    own_rules = run_rules(run)

    def request(entry: DeferredToolCall, kind: DeferredKind) -> DeferredRequest:
        call = entry.target_call
        args = call.args_as_dict()
        approval = kind == DeferredKind.APPROVAL
        reason = approval_reason(policy_version, call.tool_name, args, also=own_rules) if approval else ""
        if call.tool_name == OVER_BUDGET_TOOL:
            reason = f"Over budget ({args.get('budget')}): spent {args.get('spent')} of {args.get('limit')}."
        return DeferredRequest(
            execution_id=run.execution_id,
            run=run,
            checkpoint=checkpoint,
            tool_call_id=call.tool_call_id,
            tool_name=call.tool_name,
            kind=kind,
            args=args,
            reason=reason,
            # A child's request is answered when the child ends; the approval timeout is for people.
            expires_at=None if kind == DeferredKind.CHILD else expiry_for(policy_version, now),
        )

    # Rows in the order the model made the calls, so the approval form lists call-1-0 before call-1-1
    # whatever order the tools deferred in.
    order = _call_order(result)
    entries = sorted(
        [*deferred.approvals, *deferred.calls],
        key=lambda entry: order.get(entry.model_call.tool_call_id, len(order)),
    )
    DeferredRequest.objects.bulk_create(
        [request(entry, DeferredKind(deferred.kind(entry.target_call.tool_call_id))) for entry in entries]
    )
    return list(DeferredRequest.objects.filter(run=run, checkpoint=checkpoint).order_by("id"))


def _call_order(result: HarnessRunResult[Any]) -> dict[str, int]:
    """Tool call id -> its index in the last model response of the result's history."""
    history = result.state.message_history if result.state is not None else []
    for message in reversed(history):
        if isinstance(message, ModelResponse):
            return {call.tool_call_id: index for index, call in enumerate(message.tool_calls)}
    return {}


def _record_result(
    run: Run, lease: Lease, result: HarnessRunResult[Any], last_index: int, chain: checkpoints.CheckpointChain
) -> None:
    usage = result.usage.model_dump(mode="json")
    # Loaded with the run; a child's parent request is set when it is created and never changes.
    child = run.execution.parent_request_id is not None
    with transaction.atomic():
        if result.status in ("completed", "suspended"):
            assert result.state is not None
            terminal = checkpoints.record(
                run,
                result.state,
                lease=lease,
                kind=CheckpointKind.TERMINAL,
                journal_index=last_index,
                metadata={"status": result.status},
                select_it=True,
                chain=chain,
            )
            if result.status == "completed":
                leases.release(lease, RunStatus.COMPLETED, output=json.loads(result.output_json()), usage=usage)
                _finish_execution(lease, ExecutionStatus.COMPLETED, child=child)
            else:
                requests = _deferred_requests(run, result, terminal)
                leases.release(lease, RunStatus.SUSPENDED, usage=usage)
                drop_unseen_request(lease.execution_pk, lease.run_pk)
                _finish_execution(lease, ExecutionStatus.WAITING)
                assert result.deferred is not None
                start_children(run.execution, requests, result.deferred)
                publish_approvals_changed()
                if any(request.kind != DeferredKind.CHILD for request in requests):
                    announce(HostEvent.APPROVAL_REQUESTED, execution=lease.execution_pk, checkpoint=terminal.pk)
            return
        if result.state is not None:
            # Not selected: a failure candidate is for an operator to judge, not a continuation.
            checkpoints.record(
                run,
                result.state,
                lease=lease,
                kind=CheckpointKind.FAILURE_CANDIDATE,
                journal_index=last_index,
                metadata={"status": result.status},
                chain=chain,
            )
        if result.status == "cancelled":
            leases.release(lease, RunStatus.CANCELLED, usage=usage)
            _finish_execution(lease, ExecutionStatus.CANCELLED, child=child)
            return
        failure = result.failure or SafeFailure(code="run_failed", message="The run failed.")
        leases.release(lease, RunStatus.FAILED, usage=usage, failure_code=failure.code, failure_message=failure.message)
        _finish_execution(
            lease, ExecutionStatus.FAILED, child=child, failure_code=failure.code, failure_message=failure.message
        )
