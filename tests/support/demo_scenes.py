"""The demo as an operator sees it after a while: `harness_demo` settled on the live stack, its deployment
approved, its question cancelled after a wait, and a Host-managed child whose deploy was approved, so every kind
of lane (recovery, resume, cancelled wait, child) is on a page. Used by the browser tests of the pages."""

from __future__ import annotations

import time
import uuid
from concurrent.futures import ThreadPoolExecutor

from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection

from runs.models import ACTIVE_EXECUTION_STATUSES, Execution, ExecutionStatus, ExecutionTrigger
from runs.services.lifecycle import Answer, cancel_execution, executions, pending_set, submit_decisions
from runs.services.recovery import recovery

CHILD_TITLE = "Child delegation"
# Long enough that the cancelled wait is drawn as a wait, not folded away as a short pause.
CANCEL_AFTER_SECONDS = 1.5


def settle(pks: set[int], *, timeout: float = 120) -> dict[int, str]:
    """Sweep until none of these executions is queued or running (waiting ones are settled)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        recovery.sweep()
        busy = Execution.objects.filter(pk__in=pks, status__in=ACTIVE_EXECUTION_STATUSES).exclude(
            status=ExecutionStatus.WAITING
        )
        if not busy.exists():
            return dict(Execution.objects.filter(pk__in=pks).values_list("pk", "status"))
        time.sleep(0.3)
    raise AssertionError(
        f"demo did not settle: {dict(Execution.objects.filter(pk__in=pks).values_list('pk', 'status'))}"
    )


def approve_all(execution: Execution, user: User) -> None:
    execution.refresh_from_db()
    requests = pending_set(execution)
    assert requests, f"{execution} has nothing to approve"
    submit_decisions(
        execution,
        checkpoint_id=execution.thread.selected_checkpoint_id,
        key=uuid.uuid4().hex,
        answers=[Answer(tool_call_id=request.tool_call_id, verdict="approved") for request in requests],
        user=user,
    )


def demo_scene(approver: User) -> dict[str, Execution]:
    """Every demo execution by thread title, settled; needs the live stack and a short lease (3 s). Built on a
    thread of its own: the demo runs one execution in this process, which a Playwright page's loop would refuse."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(_build, approver).result()


def _build(approver: User) -> dict[str, Execution]:
    call_command("harness_demo")
    first = Execution.objects.select_related("thread__profile").first()
    assert first is not None, "harness_demo started nothing"
    child_thread = executions.create_thread(first.thread.profile, title=CHILD_TITLE)
    executions.start_execution(child_thread, "child: deploy release 2.0", trigger=ExecutionTrigger.DEMO)
    scene = {e.thread.title: e for e in Execution.objects.select_related("thread").filter(parent_request=None)}
    settle({execution.pk for execution in scene.values()})
    child = Execution.objects.get(parent_request__execution=scene[CHILD_TITLE])
    settle({child.pk})
    approve_all(scene["Deployment (needs approval)"], approver)
    approve_all(child, approver)
    time.sleep(CANCEL_AFTER_SECONDS)
    assert cancel_execution(scene["Question for the operator"], user=approver)
    settle({execution.pk for execution in scene.values()} | {child.pk})
    scene["child"] = child
    for execution in scene.values():
        execution.refresh_from_db()
    connection.close()
    return scene
