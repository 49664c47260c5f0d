"""The host on real processes: an RQ worker subprocess, killed with SIGKILL at random moments."""

from __future__ import annotations

import random
import time

import pytest
from django.core.management import call_command

from runs.demo_profile import ensure_demo_profile
from runs.models import ACTIVE_EXECUTION_STATUSES, Execution, ExecutionStatus, Run, RunReason, RunStatus, ToolDispatch
from runs.services.lifecycle import executions
from runs.services.recovery import recovery
from tests.support import factories
from tests.support.host_runs import assert_contiguous
from tests.support.services import wait_until


@pytest.fixture
def fast_recovery(settings):
    settings.HARNESS_RECOVERY_BACKOFF_SECONDS = 0.2
    factories.configure_policy(lease_seconds=3, max_attempts=10)


def settle(execution_pks: set[int], *, timeout: float, stack) -> None:
    """Sweep until no execution is active except those waiting."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        recovery.sweep()
        active = Execution.objects.filter(pk__in=execution_pks, status__in=ACTIVE_EXECUTION_STATUSES)
        if not active.exclude(status=ExecutionStatus.WAITING).exists():
            return
        time.sleep(0.3)
    states = list(Execution.objects.filter(pk__in=execution_pks).values_list("pk", "status"))
    raise AssertionError(f"executions did not settle in {timeout}s: {states}\n{stack.worker.log()[-3000:]}")


def test_harness_demo_runs_on_the_worker_and_its_crashed_execution_is_recovered(live_stack, fast_recovery):
    call_command("harness_demo")
    demo = {execution.thread.title: execution for execution in Execution.objects.select_related("thread")}
    settle({execution.pk for execution in demo.values()}, timeout=120, stack=live_stack)
    status = {title: Execution.objects.get(pk=execution.pk).status for title, execution in demo.items()}
    assert status == {
        "Record lookup": "completed",
        "Research": "completed",
        "Deployment (needs approval)": "waiting",
        "Question for the operator": "waiting",
        "Guided tour": "waiting",
        "Recovered after a crash": "completed",
        "Research team: summary": "completed",
    }
    crashed = demo["Recovered after a crash"]
    runs = list(crashed.runs.order_by("number"))
    assert [(run.reason, run.status) for run in runs] == [
        (RunReason.INITIAL, RunStatus.ABANDONED),
        (RunReason.RECOVERY, RunStatus.COMPLETED),
    ]
    for execution in demo.values():
        execution.refresh_from_db()
        assert_contiguous(execution)
        assert execution.timeline.exists()
        assert execution.thread.checkpoints.filter(kind="terminal").exists()


def test_killing_the_worker_at_random_moments_loses_and_repeats_nothing(live_stack, fast_recovery):
    profile = ensure_demo_profile()
    rng = random.Random(20)
    started: set[int] = set()
    # Four rounds, each starting five executions and killing the worker at a random moment of their slow step: a
    # round always has runs in flight to kill, however fast (or slowly, on a loaded machine) the last one went.
    for round_number in range(4):
        batch = set()
        for number in range(5):
            thread = executions.create_thread(profile, title=f"fault {round_number}.{number}")
            batch.add(executions.start_execution(thread, "one slow 0.3 step").pk)
        started |= batch
        # Queued after the last restart, so the worker that took them is the one about to be killed.
        wait_until(
            lambda batch=batch: Run.objects.filter(execution__in=batch, status=RunStatus.RUNNING).exists(),
            timeout=60,
            what="a run of the round in flight",
        )
        time.sleep(rng.uniform(0.0, 0.3))
        live_stack.worker.kill()
        live_stack.restart_worker()

    settle(started, timeout=110, stack=live_stack)
    executions_done = Execution.objects.filter(pk__in=started)
    assert set(executions_done.values_list("status", flat=True)) == {ExecutionStatus.COMPLETED}
    abandoned = Run.objects.filter(execution__in=executions_done, status=RunStatus.ABANDONED)
    assert abandoned.exists(), "no kill hit a running run"
    for dead in abandoned:
        successor = Run.objects.get(previous_run=dead)
        assert successor.reason == RunReason.RECOVERY and successor.run_id not in (None, dead.run_id)
        last = dead.timeline.order_by("-position").first()
        # A run killed before its first commit has no lane; any other lane ends with the closing RUN_ERROR.
        assert last is None or last.event_type == "RUN_ERROR"
    for execution in executions_done:
        assert_contiguous(execution)
        # Unmarked side effects: never dispatched twice, not even across the crash of the run that started it.
        slow = ToolDispatch.objects.filter(run__execution=execution, tool_name="slow_step", recovery_retryable=False)
        assert slow.count() <= 1


def test_harness_run_follows_an_execution_on_the_worker(live_stack, fast_recovery, capsys):
    call_command("harness_run", "Please look up REC-42", "--timeout", "90")
    out = capsys.readouterr().out
    assert "tool lookup_record called" in out
    # Streamed text reads as lines: the run label starts a line, it is not repeated before every delta.
    assert "[run 1] assistant: " in out
    assert all(line.count("[run ") <= 1 for line in out.splitlines())
    assert "-- execution completed" in out
    assert Execution.objects.get().status == ExecutionStatus.COMPLETED
