"""Runs executed in this process: journal, timeline, checkpoints, suspension, recovery after a crash, forks."""

from __future__ import annotations

import json
from datetime import timedelta
from functools import partial

import pytest
from asgiref.sync import async_to_sync
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from pydantic_ai import ToolReturnPart

from runs.harness import DeferredToolResume, is_unknown_result
from runs.models import (
    Checkpoint,
    CheckpointKind,
    DeferredRequest,
    DeferredStatus,
    DroppedCancelRequest,
    Execution,
    ExecutionStatus,
    Run,
    RunReason,
    RunStatus,
    Thread,
    TimelineEvent,
    ToolDispatch,
    Verdict,
)
from runs.services.lifecycle import Answer, cancellation, executions, forks, submit_decisions
from runs.services.recovery import recovery
from runs.services.store import checkpoints, journal, leases
from runs.services.worker import runner
from runs.services.worker.batching import BatchWriter
from tests.support import factories
from tests.support.host_runs import (
    Crash,
    assert_contiguous,
    crash_at_model_request,
    dead_after_the_slow_step,
    expire_leases,
    start,
)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_recovery_backoff")]


async def _collect(items):
    return [item async for item in items]


def dispatches(tool: str) -> list[str]:
    return list(ToolDispatch.objects.filter(tool_name=tool).values_list("tool_call_id", flat=True))


def test_a_demo_run_stores_journal_timeline_checkpoints_and_dispatches(demo_thread):
    run = start(demo_thread, "Please look up REC-42")
    assert runner.execute_run(run.pk) == "completed"
    run.refresh_from_db()
    execution = run.execution
    assert (run.status, execution.status) == (RunStatus.COMPLETED, ExecutionStatus.COMPLETED)
    assert run.run_id and run.lease_token is None and "REC-42" in run.output
    assert_contiguous(execution)
    types = list(TimelineEvent.objects.filter(run=run).values_list("event_type", flat=True))
    assert types[0] == "RUN_STARTED" and types[-1] == "RUN_FINISHED"
    assert {"TOOL_CALL_START", "TOOL_CALL_RESULT", "REASONING_MESSAGE_START", "TEXT_MESSAGE_CONTENT"} <= set(types)
    boundaries = Checkpoint.objects.filter(run=run, kind=CheckpointKind.BOUNDARY)
    assert {cp.metadata["boundary"] for cp in boundaries} == {"model_request", "tool_execution"}
    for checkpoint in boundaries:
        # The journal item at a checkpoint's index is the boundary fact it was taken at.
        assert run.journal.get(index=checkpoint.journal_index).kind == "harness.state.checkpoint_boundary"
        checkpoints.load(checkpoint)
    demo_thread.refresh_from_db()
    terminal = demo_thread.selected_checkpoint
    assert terminal.kind == CheckpointKind.TERMINAL and terminal.run_id == run.pk
    assert terminal.journal_index == run.journal.count() - 1
    assert ToolDispatch.objects.get(tool_name="lookup_record").recovery_retryable is True


def test_a_tool_starts_after_its_dispatch_committed_with_its_boundary_checkpoint(settings):
    settings.HARNESS_TOOLSETS = ["tests.support.ledger_probe.toolset"]
    settings.HARNESS_DEMO_MODEL = "tests.support.ledger_probe.model"
    run = start(factories.thread(model="demo", tools=["look_in_ledger"]), "Look in the ledger")

    with CaptureQueriesContext(connection) as queries:
        assert runner.execute_run(run.pk) == "completed"

    run.refresh_from_db()
    assert run.output == "The ledger said: recorded."
    statements = [query["sql"] for query in queries.captured_queries]
    inserts = [(n, sql.split('"')[1]) for n, sql in enumerate(statements) if sql.startswith("INSERT INTO")]
    recorded = next(n for n, table in inserts if table == "runs_tooldispatch")
    checkpointed = max(n for n, table in inserts if table == "runs_checkpoint" and n < recorded)
    # Written in the checkpoint's own transaction: no transaction or savepoint opens between the two.
    assert not [sql for sql in statements[checkpointed:recorded] if sql.startswith(("SAVEPOINT", "BEGIN"))]
    dispatch = ToolDispatch.objects.get(run=run)
    assert (dispatch.tool_call_id, dispatch.tool_name) == ("look-1", "look_in_ledger")
    assert dispatch.recovery_retryable is False
    boundary = Checkpoint.objects.get(run=run, kind=CheckpointKind.BOUNDARY, metadata__boundary="tool_execution")
    assert run.journal.get(index=boundary.journal_index).kind == "harness.state.checkpoint_boundary"


def test_a_run_starts_and_ends_without_statements_it_does_not_need(demo_thread):
    """A worker starts and ends runs by the hundred on one database thread: every statement there is paid for."""
    run = start(demo_thread, "Please look up REC-42")

    with CaptureQueriesContext(connection) as queries:
        assert runner.execute_run(run.pk) == "completed"

    statements = [query["sql"] for query in queries.captured_queries]
    # The thread id comes with the run the worker loads, not from a query of its own.
    assert not [sql for sql in statements if '"runs_thread"."thread_id" AS "execution__thread__thread_id"' in sql]
    # The terminal checkpoint's transaction checks the lease once, then selects the checkpoint.
    terminal = max(n for n, sql in enumerate(statements) if sql.startswith('INSERT INTO "runs_checkpoint"'))
    selected = next(n for n, sql in enumerate(statements) if sql.startswith('UPDATE "runs_thread" SET "selected'))
    assert terminal < selected
    assert not [sql for sql in statements[terminal:selected] if sql.startswith('UPDATE "runs_run" SET "heartbeat_at"')]
    # An execution started by an operator has no parent request to answer.
    assert not [sql for sql in statements if "runs_deferredrequest" in sql]


def test_the_final_journal_item_refers_to_the_terminal_checkpoint_instead_of_carrying_the_state(demo_thread):
    run = start(demo_thread, "Please look up REC-42")
    assert runner.execute_run(run.pk) == "completed"
    entry = run.journal.get(kind="result.completed")
    body = json.loads(entry.payload)["body"]
    assert body["state_checkpointed"] is True and body["state"] is None
    assert "REC-42" not in json.dumps({key: value for key, value in body.items() if key != "output"})
    terminal = Checkpoint.objects.get(run=run, kind=CheckpointKind.TERMINAL)
    assert terminal.journal_index == entry.index
    # Every reader of the journal gets the result whole, its state read (digest-checked) from the checkpoint.
    assert journal.decoded(entry).result.state == checkpoints.load(terminal)
    items = async_to_sync(_collect)(journal.read_prefix(run))
    assert items[-1].result.state == checkpoints.load(terminal)


def test_a_result_whose_checkpoint_was_altered_or_removed_is_refused_when_read(demo_thread):
    run = start(demo_thread, "Please look up REC-42")
    assert runner.execute_run(run.pk) == "completed"
    entry = run.journal.get(kind="result.completed")
    terminal = Checkpoint.objects.get(run=run, kind=CheckpointKind.TERMINAL)
    Checkpoint.objects.filter(pk=terminal.pk).update(state_json=terminal.state_json.replace("}", " }", 1))
    with pytest.raises(checkpoints.CheckpointError, match="was altered"):
        journal.decoded(entry)
    Thread.objects.filter(pk=demo_thread.pk).update(selected_checkpoint=None)
    Checkpoint.objects.filter(pk=terminal.pk).delete()
    with pytest.raises(journal.JournalError, match="refers to a checkpoint that does not exist"):
        journal.decoded(entry)


def test_a_suspended_run_waits_then_resumes_with_the_operators_answer(demo_thread):
    run = start(demo_thread, "deploy the release")
    assert runner.execute_run(run.pk) == "suspended"
    execution = run.execution
    execution.refresh_from_db()
    assert execution.status == ExecutionStatus.WAITING and execution.finished_at is None
    request = DeferredRequest.objects.get(execution=execution)
    assert (request.tool_name, request.kind, request.args) == ("deploy_release", "approval", {"version": "1.4.2"})
    suspended = journal.decoded(run.journal.get(kind="result.suspended"))
    deferred = suspended.result.deferred
    assert [entry.target_call.tool_call_id for entry in deferred.approvals] == [request.tool_call_id]
    assert dispatches("deploy_release") == []

    with transaction.atomic():
        resume_run = executions.resume_execution(
            execution, DeferredToolResume(deferred, deferred.build_results(approve_all=True))
        )
    assert runner.execute_run(resume_run.pk) == "completed"
    execution.refresh_from_db()
    assert execution.status == ExecutionStatus.COMPLETED
    assert dispatches("deploy_release") == [request.tool_call_id]
    resume_run.refresh_from_db()
    assert resume_run.reason == RunReason.RESUME and resume_run.run_id != run.run_id
    # The accepted answer is kept beside each checkpoint until the history contains the deploy's result.
    pending = {
        cp.metadata["boundary"]: checkpoints.pending_input(cp)
        for cp in Checkpoint.objects.filter(run=resume_run, kind=CheckpointKind.BOUNDARY)
    }
    assert pending["tool_execution"].recovery is True
    assert [e.target_call.tool_call_id for e in pending["tool_execution"].requests.approvals] == [request.tool_call_id]
    assert pending["model_request"] is None
    assert_contiguous(execution)


@pytest.mark.parametrize(("mode", "slow_runs"), [("declared", 1), ("always", 2)])
def test_a_crashed_run_is_recovered_by_a_new_run_from_the_last_checkpoint(demo_thread, monkeypatch, mode, slow_runs):
    factories.configure_policy(tool_recovery=mode)
    dead = start(demo_thread, "look up the record, then a slow 0.1 step")
    # Third model request = after the slow step returned; the checkpoint before it still has the call open.
    crash_at_model_request(monkeypatch, 3)
    with pytest.raises(Crash):
        runner.execute_run(dead.pk)
    monkeypatch.undo()
    assert len(dispatches("slow_step")) == 1

    # Nothing happens while the lease is valid; once it expired the sweep takes over.
    assert recovery.sweep().abandoned == 0
    expire_leases()
    report = recovery.sweep()
    assert (report.abandoned, report.closed, report.recovered) == (1, 1, 1)
    dead.refresh_from_db()
    assert dead.status == RunStatus.ABANDONED and dead.lease_token is None
    lane = list(TimelineEvent.objects.filter(run=dead).order_by("position"))
    assert lane[-1].event_type == "RUN_ERROR" and lane[-1].journal_entry is None
    assert lane[-1].event["code"] == recovery.WORKER_LOST

    successor = Run.objects.get(previous_run=dead)
    assert (successor.reason, successor.attempt, successor.tool_recovery) == (RunReason.RECOVERY, 2, mode)
    assert successor.start_checkpoint.metadata == {"boundary": "tool_execution"}
    assert runner.execute_run(successor.pk) == "completed"
    successor.refresh_from_db()
    assert successor.run_id not in (None, dead.run_id)
    execution = successor.execution
    execution.refresh_from_db()
    assert execution.status == ExecutionStatus.COMPLETED
    assert_contiguous(execution)
    slow_calls = dispatches("slow_step")
    assert len(slow_calls) == slow_runs and len(set(slow_calls)) == 1
    final = checkpoints.load(execution.thread.selected_checkpoint)
    returns = [p for m in final.message_history for p in m.parts if isinstance(p, ToolReturnPart)]
    slow_return = next(p for p in returns if p.tool_name == "slow_step")
    assert is_unknown_result(slow_return) is (mode == "declared")


def test_rebuilding_a_dead_runs_projection_rebuilds_no_execution(demo_thread, monkeypatch):
    """S21: closing the lane replays the journal into a fresh observer; it runs nothing and writes no state.

    Execution (a new run from the checkpoint, with a new run id and lease) is the recovery step's alone.
    """
    dead = dead_after_the_slow_step(demo_thread, monkeypatch)
    assert recovery.abandon(dead, now=timezone.now())
    demo_thread.refresh_from_db()
    selected = demo_thread.selected_checkpoint_id
    counts = (Run.objects.count(), Checkpoint.objects.count(), ToolDispatch.objects.count(), dead.journal.count())

    assert recovery.close_projection(dead)

    assert (
        Run.objects.count(),
        Checkpoint.objects.count(),
        ToolDispatch.objects.count(),
        dead.journal.count(),
    ) == counts
    dead.refresh_from_db()
    assert (dead.status, dead.lease_token) == (RunStatus.ABANDONED, None)
    demo_thread.refresh_from_db()
    assert demo_thread.selected_checkpoint_id == selected
    assert TimelineEvent.objects.filter(run=dead).order_by("position").last().event_type == "RUN_ERROR"
    assert dead.execution.status == ExecutionStatus.RECOVERING


def test_recovery_gives_up_after_the_policys_attempts(demo_thread, monkeypatch):
    factories.configure_policy(max_attempts=1)
    dead = start(demo_thread, "look up REC-42")
    crash_at_model_request(monkeypatch, 2)
    with pytest.raises(Crash):
        runner.execute_run(dead.pk)
    expire_leases()
    report = recovery.sweep()
    assert (report.abandoned, report.failed, report.recovered) == (1, 1, 0)
    execution = Execution.objects.get(pk=dead.execution_id)
    assert execution.status == ExecutionStatus.FAILED
    assert execution.failure_code == recovery.RECOVERY_EXHAUSTED
    assert "limit of 1 attempts" in execution.failure_message


def test_a_cancel_request_reaches_the_running_worker(demo_thread):
    factories.configure_policy(lease_seconds=1)
    run = start(demo_thread, "a slow 3 step")
    cancellation.cancel_execution(run.execution, user=None)
    assert runner.execute_run(run.pk) == "cancelled"
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED and run.execution.status == ExecutionStatus.CANCELLED


def cancel_at_the_first_checkpoint(monkeypatch, user) -> list[str]:
    """Ask to cancel the run's execution once its first checkpoint is stored (in a transaction of its own, while
    it runs); returns the execution's status as the request found it."""
    real = checkpoints.record
    found: list[str] = []

    def record(run, state, **kwargs):
        stored = real(run, state, **kwargs)
        monkeypatch.setattr(checkpoints, "record", real)
        execution = Execution.objects.get(pk=run.execution_id)
        found.append(execution.status)
        cancellation.cancel_execution(execution, user=user)
        return stored

    monkeypatch.setattr(checkpoints, "record", record)
    return found


def test_a_cancel_request_the_run_never_saw_is_dropped_when_it_suspends(demo_thread, monkeypatch, django_user_model):
    """A request to stop running work must not stop the run that resumes after an approver's answer."""
    # A heartbeat every 20 minutes: none sees the request before the run suspends.
    factories.configure_policy(lease_seconds=3600)
    viewer = django_user_model.objects.create_user("viewer")  # may stop running work, may not decide
    run = start(demo_thread, "deploy the release")
    found = cancel_at_the_first_checkpoint(monkeypatch, viewer)

    assert runner.execute_run(run.pk) == "suspended"

    assert found == [ExecutionStatus.RUNNING]
    execution = Execution.objects.get(pk=run.execution_id)
    assert execution.status == ExecutionStatus.WAITING
    assert (execution.cancel_requested, execution.cancelled_by, execution.cancelled_at) == (False, None, None)
    dropped = DroppedCancelRequest.objects.get(execution=execution)
    assert (dropped.run, dropped.requested_by) == (run, viewer) and dropped.requested_at <= dropped.dropped_at

    request = DeferredRequest.objects.get(execution=execution)
    submission = submit_decisions(
        execution,
        checkpoint_id=request.checkpoint_id,
        key="approve-after-dropped-cancel",
        answers=[Answer(request.tool_call_id, Verdict.APPROVED)],
        user=factories.create_decider(django_user_model, "approver", "approver-password-1"),
    )
    execution.refresh_from_db()
    assert execution.status == ExecutionStatus.QUEUED and not execution.cancel_requested, "nothing to inherit"
    assert runner.execute_run(submission.resume_run.pk) == "completed"

    execution.refresh_from_db()
    assert (execution.status, execution.cancelled_at) == (ExecutionStatus.COMPLETED, None)
    assert dispatches("deploy_release") == [request.tool_call_id]
    assert list(execution.runs.order_by("number").values_list("status", flat=True)) == [
        RunStatus.SUSPENDED,
        RunStatus.COMPLETED,
    ]
    assert DroppedCancelRequest.objects.filter(execution=execution).count() == 1


def test_a_cancel_request_a_heartbeat_sees_before_the_run_suspends_still_cancels(
    demo_thread, monkeypatch, django_user_model
):
    # A heartbeat every third of a second, while the slow step before the deploy takes 10 seconds.
    factories.configure_policy(lease_seconds=1)
    viewer = django_user_model.objects.create_user("viewer")
    run = start(demo_thread, "a slow 10 step, then deploy the release")
    found = cancel_at_the_first_checkpoint(monkeypatch, viewer)

    assert runner.execute_run(run.pk) == "cancelled"

    assert found == [ExecutionStatus.RUNNING]
    execution = Execution.objects.get(pk=run.execution_id)
    assert (execution.status, execution.cancelled_by) == (ExecutionStatus.CANCELLED, viewer)
    assert not DeferredRequest.objects.filter(execution=execution).exists()
    assert not DroppedCancelRequest.objects.exists()
    assert dispatches("deploy_release") == []


def test_cancelling_a_waiting_execution_closes_its_open_requests(django_user_model):
    from django.contrib.auth.models import Permission

    from runs.services.lifecycle import SubmissionRejected
    from tests.support.factories import suspended_execution

    waiting = suspended_execution()
    cancellation.cancel_execution(waiting.execution, user=None)
    waiting.execution.refresh_from_db()
    assert waiting.execution.status == ExecutionStatus.CANCELLED
    assert set(waiting.execution.deferred_requests.values_list("status", flat=True)) == {DeferredStatus.EXPIRED}
    operator = django_user_model.objects.create_user("decider")
    operator.user_permissions.add(Permission.objects.get(codename="decide_deferred"))
    answers = [Answer(request.tool_call_id, Verdict.APPROVED) for request in waiting.requests.values()]
    with pytest.raises(SubmissionRejected) as rejected:
        submit_decisions(
            waiting.execution,
            checkpoint_id=waiting.checkpoint_id,
            key="after-cancel",
            answers=answers,
            user=django_user_model.objects.get(pk=operator.pk),
        )
    assert rejected.value.code == "stale"
    assert list(waiting.execution.runs.values_list("number", flat=True)) == [1]


def test_a_checkpoint_stores_the_harness_state_alone_and_the_host_keeps_the_rest_beside_it(demo_thread):
    """S88: continuation in the state; provenance, policy, lease and open requests in the Host's own rows."""
    run = start(demo_thread, "deploy the release")
    assert runner.execute_run(run.pk) == "suspended"
    envelope = {"schema_version", "thread_id", "agent_context_state", "refs", "message_history", "environment_states"}
    written = list(Checkpoint.objects.filter(run=run))
    assert {checkpoint.kind for checkpoint in written} == {CheckpointKind.BOUNDARY, CheckpointKind.TERMINAL}
    for checkpoint in written:
        state = json.loads(checkpoints.load(checkpoint).model_dump_json())
        assert set(state) == envelope and state["agent_context_state"] == {"entries": {}}
        assert (checkpoint.thread_id, checkpoint.run_id) == (demo_thread.pk, run.pk)
        assert checkpoint.journal_index is not None and len(checkpoint.digest) == 64
    run.refresh_from_db()
    assert run.policy_version_id is not None and run.lease_token is None
    request = DeferredRequest.objects.get(execution=run.execution)
    assert request.checkpoint.kind == CheckpointKind.TERMINAL and request.tool_name == "deploy_release"


def test_a_tampered_checkpoint_is_refused_and_nothing_is_written(demo_thread):
    selected = demo_thread.selected_checkpoint
    Checkpoint.objects.filter(pk=selected.pk).update(state_json=selected.state_json.replace("[]", "[ ]", 1))
    with pytest.raises(checkpoints.CheckpointError, match="was altered: its digest does not match"):
        checkpoints.load(Checkpoint.objects.get(pk=selected.pk))
    run = start(demo_thread, "hello")
    assert runner.execute_run(run.pk) == "failed: checkpoint invalid"
    run.refresh_from_db()
    assert run.failure_code == "checkpoint_invalid" and "altered" in run.failure_message
    assert not run.journal.exists() and not TimelineEvent.objects.exists()
    demo_thread.refresh_from_db()
    assert demo_thread.selected_checkpoint_id == selected.pk


def test_a_failed_runs_candidate_is_stored_but_not_selected(demo_thread):
    """S81: the failure candidate is kept for an operator to judge; the Thread continues from its last good state."""
    good = start(demo_thread, "Please look up REC-42")
    assert runner.execute_run(good.pk) == "completed"
    demo_thread.refresh_from_db()
    selected = demo_thread.selected_checkpoint

    failed = start(demo_thread, "fail please")
    assert runner.execute_run(failed.pk) == "failed"
    failed.refresh_from_db()
    assert (failed.status, failed.failure_code) == (RunStatus.FAILED, "model_http_error")
    candidate = Checkpoint.objects.get(run=failed, kind=CheckpointKind.FAILURE_CANDIDATE)
    assert checkpoints.load(candidate).message_history[-1].parts[0].content == "Preparing the report for you"
    demo_thread.refresh_from_db()
    assert demo_thread.selected_checkpoint_id == selected.pk

    follow_up = start(demo_thread, "hello again")
    assert follow_up.start_checkpoint_id == selected.pk
    assert runner.execute_run(follow_up.pk) == "completed"
    demo_thread.refresh_from_db()
    history = checkpoints.load(demo_thread.selected_checkpoint).message_history
    assert history[: len(checkpoints.load(selected).message_history)] == checkpoints.load(selected).message_history
    assert "Preparing the report for you" not in str(history)


def test_the_selected_checkpoint_moves_only_forward_and_only_with_the_lease(demo_thread):
    run = start(demo_thread, "hello")
    lease = leases.acquire(run.pk)
    state = checkpoints.load(demo_thread.selected_checkpoint)
    newer = checkpoints.record(
        run, state, lease=lease, kind=CheckpointKind.TERMINAL, journal_index=None, select_it=True
    )
    with pytest.raises(checkpoints.CheckpointError, match="already selected a newer checkpoint"), transaction.atomic():
        checkpoints.select(demo_thread, demo_thread.checkpoints.get(kind=CheckpointKind.INITIAL), lease=lease)
    Run.objects.filter(pk=run.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    before = Checkpoint.objects.count()
    with pytest.raises(leases.LeaseLost):
        checkpoints.record(run, state, lease=lease, kind=CheckpointKind.TERMINAL, journal_index=None, select_it=True)
    assert Checkpoint.objects.count() == before
    demo_thread.refresh_from_db()
    assert demo_thread.selected_checkpoint_id == newer.pk


def test_a_fork_continues_from_any_checkpoint_as_a_new_thread(demo_thread):
    run = start(demo_thread, "Please look up REC-42")
    runner.execute_run(run.pk)
    source = Checkpoint.objects.filter(run=run, kind=CheckpointKind.BOUNDARY).order_by("pk")[1]
    fork = forks.fork_thread(source, title="what if")
    assert fork.thread_id != demo_thread.thread_id and fork.forked_from == source
    forked_state = checkpoints.load(fork.selected_checkpoint)
    assert forked_state.message_history == checkpoints.load(source).message_history
    assert forked_state.thread_id == fork.thread_id
    follow_up = start(fork, "hello again")
    assert runner.execute_run(follow_up.pk) == "completed"
    demo_thread.refresh_from_db()
    assert demo_thread.selected_checkpoint.run_id == run.pk


def test_the_database_allows_one_active_execution_per_thread_and_one_leased_run_per_execution(demo_thread):
    run = start(demo_thread, "hello")
    with pytest.raises(executions.ExecutionBusy):
        executions.start_execution(demo_thread, "again")
    with pytest.raises(IntegrityError), transaction.atomic():
        Execution.objects.create(
            thread=demo_thread, number=9, policy_version=run.policy_version, status=ExecutionStatus.WAITING
        )
    Run.objects.filter(pk=run.pk).update(lease_token="a" * 32)
    second = executions.new_run(run.execution, reason=RunReason.RECOVERY, previous=run)
    with pytest.raises(IntegrityError), transaction.atomic():
        Run.objects.filter(pk=second.pk).update(lease_token="b" * 32)


def test_the_journal_prefix_rebuilds_the_runs_projection(demo_thread):

    from observers.agui import HarnessAguiStreamObserver
    from runs.services.timeline import dump_event

    run = start(demo_thread, "research the outage")
    runner.execute_run(run.pk)
    observer = HarnessAguiStreamObserver()
    async_to_sync(observer.resume)(journal.read_prefix(run))
    stored = [event.event for event in TimelineEvent.objects.filter(run=run).order_by("position")]
    assert [dump_event(event) for event in observer.snapshot()] == stored
    assert any(event.get("subagentRunId") for event in stored)


def test_an_interrupted_resume_is_recovered_with_the_accepted_input_marked_recovery(demo_thread, monkeypatch):
    run = start(demo_thread, "deploy the release")
    runner.execute_run(run.pk)
    suspended = journal.decoded(run.journal.get(kind="result.suspended"))
    deferred = suspended.result.deferred
    with transaction.atomic():
        resume_run = executions.resume_execution(
            run.execution, DeferredToolResume(deferred, deferred.build_results(approve_all=True))
        )
    # Dies before the approved deploy runs: its tool-execution checkpoint never becomes durable.
    crash_at_model_request(monkeypatch, 1, boundary="tool_execution")
    with pytest.raises(Crash):
        runner.execute_run(resume_run.pk)
    monkeypatch.undo()
    expire_leases()
    assert recovery.sweep().recovered == 1
    successor = Run.objects.get(previous_run=resume_run)
    assert successor.start_checkpoint == demo_thread.checkpoints.get(kind=CheckpointKind.TERMINAL)
    assert successor.deferred_resume["recovery"] is True
    assert runner.execute_run(successor.pk) == "completed"
    # A positive approval is not permission to replay: the unmarked deploy gets an unknown result instead.
    assert dispatches("deploy_release") == []
    final = checkpoints.load(Thread.objects.get(pk=demo_thread.pk).selected_checkpoint)
    deploy = next(
        p
        for m in final.message_history
        for p in m.parts
        if isinstance(p, ToolReturnPart) and p.tool_name == "deploy_release"
    )
    assert is_unknown_result(deploy)


def test_an_external_question_is_stored_as_a_question_request(demo_thread):
    run = start(demo_thread, "ask the operator which environment")
    assert runner.execute_run(run.pk) == "suspended"
    request = DeferredRequest.objects.get(execution=run.execution)
    assert (request.tool_name, request.kind) == ("ask_operator", "question")


def test_closing_a_lane_that_died_inside_a_delegation_ends_the_child_too(demo_thread, monkeypatch):
    from runs.services.store.journal import JournalRows
    from runs.services.timeline import RunProjection
    from runs.services.timeline.projection import PreparedWrite

    real = RunProjection.write

    def write(self, prepared, *, lease):
        # Dies right after the child's "started" fact became durable, however the items were batched.
        kinds = [row[4] for row in prepared.journal.rows]  # a journal row's kind column
        if "harness.delegation.inline_delegation" in kinds:
            rows = prepared.journal.rows[: kinds.index("harness.delegation.inline_delegation") + 1]
            # Timeline rows name their journal entry by index until written; one frame per row, in order.
            timeline = [row for row in prepared.timeline if row[3] <= rows[-1][1]]
            part = PreparedWrite(JournalRows(rows, prepared.journal.cursor), timeline, prepared.frames[: len(timeline)])
            real(self, part, lease=lease)
            raise Crash
        return real(self, prepared, lease=lease)

    dead = start(demo_thread, "research the outage")
    monkeypatch.setattr(RunProjection, "write", write)
    # Each item in a write of its own: a boundary's batch commits with its checkpoint, so a crash inside that
    # transaction would take the child's "started" fact back with it.
    monkeypatch.setattr(runner, "BatchWriter", partial(BatchWriter, max_items=1))
    with pytest.raises(Crash):
        runner.execute_run(dead.pk)
    monkeypatch.undo()
    expire_leases()
    assert recovery.sweep().closed == 1
    lane = list(TimelineEvent.objects.filter(run=dead).order_by("position"))
    child = next(event.event for event in lane if event.event_type == "SUBAGENT_STARTED")
    errors = [event.event for event in lane if event.event_type == "SUBAGENT_ERROR"]
    assert [(e["subagentRunId"], e["code"]) for e in errors] == [(child["subagentRunId"], recovery.WORKER_LOST)]
    assert lane[-1].event_type == "RUN_ERROR"
    assert_contiguous(dead.execution)
    successor = Run.objects.get(previous_run=dead)
    assert runner.execute_run(successor.pk) == "completed"


def test_a_worker_dying_while_it_records_the_result_leaves_neither_result_nor_outcome(demo_thread, monkeypatch):
    """The result item and the run's outcome commit together: otherwise a crash between them would leave a lane
    that ends with RUN_FINISHED for a run still leased and running, and recovery would redo finished work."""

    real = checkpoints.record

    def record(run, state, **kwargs):
        # The terminal checkpoint is the first thing the outcome writes: the worker dies as it records the result.
        if kwargs.get("kind") == CheckpointKind.TERMINAL:
            raise Crash
        return real(run, state, **kwargs)

    monkeypatch.setattr(checkpoints, "record", record)
    run = start(demo_thread, "Please look up REC-42")
    with pytest.raises(Crash):
        runner.execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING and run.lease_token is not None
    kinds = list(run.journal.values_list("kind", flat=True))
    assert kinds and not any(kind.startswith("result.") for kind in kinds)
    assert not TimelineEvent.objects.filter(run=run, event_type="RUN_FINISHED").exists()
    assert_contiguous(run.execution)


def test_a_stream_that_breaks_off_fails_the_run_and_ends_its_lane(demo_thread, monkeypatch):
    from runs.harness import RunError

    def broken(*args, **kwargs):
        raise RunError("the state store is unavailable", code="state_store_unavailable")

    monkeypatch.setattr(checkpoints, "record", broken)
    run = start(demo_thread, "hello")
    assert runner.execute_run(run.pk) == "failed: state_store_unavailable"
    run.refresh_from_db()
    assert (run.status, run.failure_code, run.lease_token) == (RunStatus.FAILED, "state_store_unavailable", None)
    assert run.execution.status == ExecutionStatus.FAILED
    last = TimelineEvent.objects.filter(run=run).order_by("-position").first()
    assert (last.event_type, last.event["code"]) == ("RUN_ERROR", "state_store_unavailable")


def test_a_stream_that_breaks_off_is_ended_by_the_workers_own_observer(demo_thread, monkeypatch):
    """The worker's observer saw exactly the items it journaled: it ends the lane without replaying the journal."""
    from runs.harness import RunError

    def broken(*args, **kwargs):
        raise RunError("the state store is unavailable", code="state_store_unavailable")

    def no_replay(*args, **kwargs):
        raise AssertionError("the worker replayed the journal prefix")

    monkeypatch.setattr(checkpoints, "record", broken)
    monkeypatch.setattr(journal, "read_prefix", no_replay)
    run = start(demo_thread, "hello")
    assert runner.execute_run(run.pk) == "failed: state_store_unavailable"
    last = TimelineEvent.objects.filter(run=run).order_by("-position").first()
    assert (last.event_type, last.event["code"], last.journal_entry) == ("RUN_ERROR", "state_store_unavailable", None)
    assert_contiguous(run.execution)


def test_a_worker_whose_write_failed_ends_its_lane_from_the_journal(demo_thread, monkeypatch):
    """A write that did not commit leaves the worker's observer ahead of the database; the lane is ended by one
    rebuilt from the journal instead."""
    from runs.services.timeline import RunProjection

    real_write, real_prefix = RunProjection.write, journal.read_prefix
    calls = {"write": 0, "replay": 0}

    def write(self, prepared, *, lease):
        calls["write"] += 1
        if calls["write"] != 2:
            return real_write(self, prepared, lease=lease)
        with transaction.atomic():
            real_write(self, prepared, lease=lease)
            raise RuntimeError("the commit failed")

    def read_prefix(*args, **kwargs):
        calls["replay"] += 1
        return real_prefix(*args, **kwargs)

    monkeypatch.setattr(RunProjection, "write", write)
    monkeypatch.setattr(journal, "read_prefix", read_prefix)
    # Its second write is at its second boundary (a result's writes end the run loop, see `BatchWriter.finish`).
    run = start(demo_thread, "look up REC-42")
    assert runner.execute_run(run.pk) == "failed: host_error"
    assert calls == {"write": 2, "replay": 1}
    lane = list(TimelineEvent.objects.filter(run=run).order_by("position"))
    assert (lane[-1].event_type, lane[-1].event["code"]) == ("RUN_ERROR", "host_error")
    assert [event.journal_entry is None for event in lane].count(True) == 1
    assert_contiguous(run.execution)


def test_a_dead_run_with_an_undecodable_journal_still_gets_closed_and_recovered(demo_thread, monkeypatch):
    dead = start(demo_thread, "look up the record")
    crash_at_model_request(monkeypatch, 2)
    with pytest.raises(Crash):
        runner.execute_run(dead.pk)
    monkeypatch.undo()
    dead.journal.filter(index=1).update(payload="{broken")
    expire_leases()
    report = recovery.sweep()
    assert (report.closed, report.recovered) == (1, 1)
    last = TimelineEvent.objects.filter(run=dead).order_by("-position").first()
    assert (last.event_type, last.event["code"]) == ("RUN_ERROR", recovery.WORKER_LOST)
    assert_contiguous(dead.execution)
