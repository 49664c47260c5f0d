"""Host-managed children: child executions a suspended run waits on, each an ordinary execution of its own thread.

A run that calls a `host_child_tool` suspends with a request of kind `child`. In the same transaction that
records the suspension, `start_children` starts one child execution per such request (`Execution.parent_request`,
unique), so the child has its own runs, checkpoints, leases, lanes and approval requests, and recovers from its
own checkpoints like any execution. Every path that ends an execution calls `answer_parent` in its own
transaction: a child's output becomes the external result of the parent's call, a failure or a cancellation
a `ToolFailed`, and the parent resumes once its whole set is answered (`approvals.answer_child_request`).
Nothing promises exactly once: a child that recovers may repeat work, as any recovered execution may.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Final

from django.db import transaction

from runs.harness import PendingDeferredCalls, child_request_of
from runs.models import (
    AgentProfile,
    DeferredKind,
    DeferredRequest,
    Execution,
    ExecutionStatus,
    ExecutionTrigger,
    Verdict,
)

from .approvals import Answer, SubmissionRejected, answer_child_request
from .executions import create_thread, start_execution

__all__ = ("MAX_CHILD_DEPTH", "answer_parent", "child_depth", "start_children")

log = logging.getLogger(__name__)

MAX_CHILD_DEPTH: Final = 4
"""How deep Host-managed children may nest (a model that delegates from every child would never end)."""


def child_depth(execution: Execution) -> int:
    """0 for an execution nobody started as a child, else one more than its parent's."""
    depth = 0
    while execution.parent_request_id is not None:
        execution = Execution.objects.get(pk=DeferredRequest.objects.get(pk=execution.parent_request_id).execution_id)
        depth += 1
    return depth


def start_children(parent: Execution, requests: Sequence[DeferredRequest], deferred: PendingDeferredCalls) -> None:
    """Inside the suspension transaction: start one child execution per child request of the suspended run.

    A child that cannot start (unknown profile, nesting too deep) answers its request with a failure at once.
    """
    depth = child_depth(parent)
    for request in requests:
        if request.kind != DeferredKind.CHILD:
            continue
        child = child_request_of(deferred.metadata.get(request.tool_call_id))
        assert child is not None, "a request of kind child carries its child request"
        profile = parent.thread.profile
        problem = ""
        if child.profile is not None:
            # Only a profile of the parent's team: a child stays in that team, and another team's profile is as
            # unknown to it as to the parent's users.
            named = AgentProfile.objects.filter(name=child.profile, team_id=parent.thread.team_id).first()
            problem = "" if named is not None else f"There is no agent profile named {child.profile!r}."
            profile = named or profile
        if depth + 1 > MAX_CHILD_DEPTH:
            problem = f"Host-managed children nest at most {MAX_CHILD_DEPTH} deep; this child was not started."
        if problem:
            _answer(request, Answer(request.tool_call_id, Verdict.FAILED, message=problem))
            continue
        title = f"Child of {parent.thread}: {child.prompt}"[:200]
        start_execution(
            create_thread(profile, title=title, team=parent.thread.team),
            child.prompt,
            user=parent.created_by,
            trigger=ExecutionTrigger.CHILD,
            parent_request=request,
        )


def answer_parent(execution_pk: int) -> None:
    """Inside the transaction that ended an execution: if it is a Host-managed child, answer its parent's request.

    Completed: the last run's output is the result. Failed or cancelled: the call fails with the reason. A
    request that no longer waits (the parent was cancelled, or answered already) is left as it is.
    """
    execution = Execution.objects.filter(pk=execution_pk).select_related("parent_request").first()
    if execution is None or execution.parent_request is None:
        return
    request = execution.parent_request
    label = f"The child execution {execution.thread.thread_id} #{execution.number}"
    if execution.status == ExecutionStatus.COMPLETED:
        last = execution.runs.order_by("-number").first()
        answer = Answer(request.tool_call_id, Verdict.EXTERNAL_RESULT, result=last.output if last else None)
    elif execution.status == ExecutionStatus.CANCELLED:
        answer = Answer(request.tool_call_id, Verdict.FAILED, message=f"{label} was cancelled.")
    elif execution.status == ExecutionStatus.FAILED:
        reason = f"{execution.failure_code}: {execution.failure_message}" if execution.failure_code else "no reason"
        answer = Answer(request.tool_call_id, Verdict.FAILED, message=f"{label} failed ({reason})."[:4000])
    else:
        return
    _answer(request, answer, child=execution)


def _answer(request: DeferredRequest, answer: Answer, *, child: Execution | None = None) -> None:
    try:
        # A savepoint: a parent that cannot be answered must not undo the transaction it is answered in (a
        # child's end, a suspension).
        with transaction.atomic():
            answer_child_request(request, answer, child=child)
    except SubmissionRejected as exc:
        log.error(
            "cannot answer the child request %s of execution %s: %s", request.pk, request.execution_id, exc.message
        )
    except Exception:
        # Anything else (a decision item that cannot be stored, say) must not undo the child's end either.
        log.exception("cannot answer the child request %s of execution %s", request.pk, request.execution_id)
