"""Checkpoint chains: deltas rebuilt exactly, HMAC digests checked along the whole chain, and forks, recovery and
pages working from a delta checkpoint (the migration of old rows: test_checkpoint_signing_migration.py)."""

from __future__ import annotations

import hashlib
import json

import pytest
from pydantic_ai import DeferredToolResults, ModelRequest, ModelResponse, TextPart, UserPromptPart

from runs.harness import DeferredToolResume, HarnessState, PendingDeferredCalls
from runs.models import Checkpoint, CheckpointKind, ExecutionStatus, Run, RunReason, Thread
from runs.services.lifecycle import forks
from runs.services.recovery import recovery
from runs.services.store import checkpoints
from runs.services.worker import runner
from tests.support import factories
from tests.support.host_runs import assert_contiguous, dead_after_the_slow_step, start

pytestmark = pytest.mark.django_db


def growing_states(thread: Thread, rounds: int) -> list[HarnessState]:
    """States of one thread, each history extending the previous one by a request and a response."""
    history: list[ModelRequest | ModelResponse] = [ModelRequest(parts=[UserPromptPart("context " * 200)])]
    states = []
    for number in range(rounds):
        history += [
            ModelRequest(parts=[UserPromptPart(f"question {number}")]),
            ModelResponse(parts=[TextPart(f"answer {number} " + "x" * 40 * number)]),
        ]
        states.append(HarnessState.new(thread_id=thread.thread_id, message_history=history))
    return states


def write_chain(thread: Thread, states: list[HarnessState]) -> list[Checkpoint]:
    chain = checkpoints.CheckpointChain()
    return [checkpoints.create(thread, state, kind=CheckpointKind.BOUNDARY, chain=chain) for state in states]


def stored_bytes(rows: list[Checkpoint]) -> int:
    return sum(len(row.state_json) + len(row.history_delta) for row in rows)


def test_a_chain_rebuilds_every_state_exactly_and_starts_new_bases_as_it_grows():
    thread = factories.thread()
    states = growing_states(thread, 30)
    rows = write_chain(thread, states)
    assert not rows[0].is_delta and rows[1].is_delta
    bases = [row for row in rows if not row.is_delta]
    assert 1 < len(bases) < 10
    for row in rows[1:]:
        if row.is_delta:
            assert row.parent_id == rows[rows.index(row) - 1].pk
            assert '"message_history"' not in row.state_json
    for row, state in zip(rows, states, strict=True):
        loaded = checkpoints.load(Checkpoint.objects.get(pk=row.pk))
        assert loaded == state
        assert loaded.model_dump_json() == state.model_dump_json()
    # Stored bytes stay within a small multiple of the last whole state (whole states each time: ~15x here).
    whole = len(states[-1].model_dump_json())
    assert stored_bytes(rows) <= 4 * whole
    assert sum(len(state.model_dump_json()) for state in states) > 10 * whole


def test_a_history_that_does_not_extend_the_parent_starts_a_new_base():
    thread = factories.thread()
    first, second = growing_states(thread, 2)
    rewritten = second.with_changes(message_history=[ModelRequest(parts=[UserPromptPart("other")])])
    rows = write_chain(thread, [first, second, rewritten])
    assert [row.is_delta for row in rows] == [False, True, False]
    assert checkpoints.load(rows[2]) == rewritten


def test_a_chain_continued_from_a_loaded_checkpoint_keeps_rebuilding_exactly():
    thread = factories.thread()
    states = growing_states(thread, 6)
    rows = write_chain(thread, states[:3])
    state, tip = checkpoints.load_chain(rows[-1])
    assert state == states[2]
    chain = checkpoints.CheckpointChain(tip)
    more = [checkpoints.create(thread, s, kind=CheckpointKind.BOUNDARY, chain=chain) for s in states[3:]]
    assert more[0].parent_id == rows[-1].pk
    assert checkpoints.load(more[-1]) == states[-1]


def tamper(row: Checkpoint, what: str) -> None:
    rows = Checkpoint.objects.filter(pk=row.pk)
    if what == "state":
        rows.update(state_json=row.state_json.replace('"refs":[]', '"refs":[ ]', 1))
    elif what == "history":
        rows.update(history_delta=row.history_delta.replace("answer", "ANSWER", 1))
    elif what == "pending":
        rows.update(pending_deferred_input={"forged": True})
    elif what == "unkeyed digest":
        rows.update(digest=hashlib.sha256(row.state_json.encode()).hexdigest())


@pytest.mark.parametrize("where", ["base", "middle", "tip"])
@pytest.mark.parametrize("what", ["state", "history", "pending", "unkeyed digest"])
def test_an_edit_anywhere_in_the_chain_is_refused(where, what):
    thread = factories.thread()
    rows = write_chain(thread, growing_states(thread, 4))
    assert [row.is_delta for row in rows] == [False, True, True, True]
    target = {"base": rows[0], "middle": rows[2], "tip": rows[3]}[where]
    if what == "history" and not target.is_delta:
        what = "state"
    tamper(target, what)
    with pytest.raises(checkpoints.CheckpointError, match="was altered"):
        checkpoints.load(Checkpoint.objects.get(pk=rows[3].pk))
    if where == "tip":
        checkpoints.load(Checkpoint.objects.get(pk=rows[2].pk))


def test_a_relinked_chain_and_a_foreign_key_are_refused(settings):
    thread = factories.thread()
    rows = write_chain(thread, growing_states(thread, 4))
    Checkpoint.objects.filter(pk=rows[3].pk).update(parent=rows[1])
    with pytest.raises(checkpoints.CheckpointError, match="was altered"):
        checkpoints.load(Checkpoint.objects.get(pk=rows[3].pk))
    settings.CHECKPOINT_KEY = "another key"
    with pytest.raises(checkpoints.CheckpointError, match="was altered"):
        checkpoints.load(Checkpoint.objects.get(pk=rows[0].pk))


def test_the_pending_input_is_covered_by_the_digest_and_survives_a_reload():
    thread = factories.thread()
    pending = DeferredToolResume(PendingDeferredCalls(), DeferredToolResults(), recovery=True)
    state = growing_states(thread, 1)[0]
    row = checkpoints.create(thread, state, kind=CheckpointKind.BOUNDARY, pending=pending)
    reloaded = Checkpoint.objects.get(pk=row.pk)
    checkpoints.load(reloaded)
    assert checkpoints.pending_input(reloaded) == pending


def delta_boundary(run: Run) -> Checkpoint:
    return next(cp for cp in Checkpoint.objects.filter(run=run, kind=CheckpointKind.BOUNDARY) if cp.is_delta)


def test_a_demo_run_writes_deltas_and_a_fork_continues_from_one(demo_thread):
    run = start(demo_thread, "Please look up REC-42")
    assert runner.execute_run(run.pk) == "completed"
    written = list(Checkpoint.objects.filter(run=run).order_by("pk"))
    assert sum(cp.is_delta for cp in written) >= 2
    source = delta_boundary(run)
    fork = forks.fork_thread(source, title="from a delta")
    assert not fork.selected_checkpoint.is_delta
    assert checkpoints.load(fork.selected_checkpoint).message_history == checkpoints.load(source).message_history
    follow_up = start(fork, "hello again")
    assert runner.execute_run(follow_up.pk) == "completed"


def test_a_crashed_run_is_recovered_from_a_delta_checkpoint(demo_thread, monkeypatch, settings):
    settings.HARNESS_RECOVERY_BACKOFF_SECONDS = 0
    dead = dead_after_the_slow_step(demo_thread, monkeypatch)
    assert recovery.sweep().recovered == 1
    successor = Run.objects.get(previous_run=dead)
    assert successor.reason == RunReason.RECOVERY and successor.start_checkpoint.is_delta
    assert runner.execute_run(successor.pk) == "completed"
    first_written = Checkpoint.objects.filter(run=successor).order_by("pk").first()
    assert first_written.parent_id == successor.start_checkpoint_id
    execution = successor.execution
    execution.refresh_from_db()
    assert execution.status == ExecutionStatus.COMPLETED
    assert_contiguous(execution)
    checkpoints.load(Thread.objects.get(pk=demo_thread.pk).selected_checkpoint)


def test_the_thread_page_lists_and_forks_a_delta_checkpoint(demo_thread, client, operator_user):
    run = start(demo_thread, "Please look up REC-42")
    runner.execute_run(run.pk)
    source = delta_boundary(run)
    client.force_login(operator_user)
    body = client.get(f"/threads/{demo_thread.pk}/").content.decode()
    assert f'data-checkpoint="{source.pk}"' in body
    response = client.post(f"/checkpoints/{source.pk}/fork/", {"title": "Fork of a delta", "submission_key": "k1"})
    fork = Thread.objects.get(title="Fork of a delta")
    assert response.status_code == 302 and fork.forked_from == source
    Checkpoint.objects.filter(pk=source.parent_id).update(state_json=json.dumps({"forged": True}))
    response = client.post(f"/checkpoints/{source.pk}/fork/", {"title": "Refused", "submission_key": "k2"}, follow=True)
    assert not Thread.objects.filter(title="Refused").exists()
    assert "was altered" in response.content.decode()


def assert_summaries_are_what_load_gives(thread: Thread) -> None:
    summaries = checkpoints.summaries(thread)
    rows = list(Checkpoint.objects.filter(thread=thread).order_by("pk"))
    assert list(summaries) == [row.pk for row in rows]
    for row in rows:
        state = checkpoints.load(row)
        loaded = checkpoints.HistorySummary(len(state.message_history), checkpoints.last_response_calls(state))
        assert summaries[row.pk] == loaded, row.pk


def test_summaries_walk_bases_deltas_branches_recoveries_and_forks_as_load_reads_them(
    demo_thread, monkeypatch, settings
):
    settings.HARNESS_RECOVERY_BACKOFF_SECONDS = 0
    dead = dead_after_the_slow_step(demo_thread, monkeypatch)
    assert recovery.sweep().recovered == 1
    successor = Run.objects.get(previous_run=dead)
    assert runner.execute_run(successor.pk) == "completed"
    fork = forks.fork_thread(delta_boundary(successor), title="from the recovery")
    assert runner.execute_run(start(fork, "Please look up REC-42").pk) == "completed"
    # A chain of many bases, a history that starts a new one, and two deltas continuing the same checkpoint.
    plain = factories.thread()
    states = growing_states(plain, 12)
    rows = write_chain(plain, states)
    branch = checkpoints.CheckpointChain(checkpoints.load_chain(rows[5])[1])
    checkpoints.create(plain, states[7], kind=CheckpointKind.BOUNDARY, chain=branch)
    write_chain(plain, [states[3].with_changes(message_history=[ModelRequest(parts=[UserPromptPart("other")])])])

    assert successor.start_checkpoint.is_delta
    assert any(summary.last_calls for summary in checkpoints.summaries(fork).values())
    for thread in (demo_thread, fork, plain):
        assert_summaries_are_what_load_gives(thread)


@pytest.mark.parametrize("what", ["state", "history", "pending", "unkeyed digest", "relinked", "another thread's"])
def test_summaries_refuse_an_altered_checkpoint_as_load_does(what):
    thread = factories.thread()
    rows = write_chain(thread, growing_states(thread, 4))
    if what == "relinked":
        Checkpoint.objects.filter(pk=rows[3].pk).update(parent=rows[1])
    elif what == "another thread's":
        other = factories.thread()
        foreign = write_chain(other, growing_states(other, 3))
        Checkpoint.objects.filter(pk=rows[3].pk).update(parent=foreign[2], base=foreign[0])
    else:
        tamper(rows[2], what)
    with pytest.raises(checkpoints.CheckpointError, match="was altered") as loaded:
        for row in Checkpoint.objects.filter(thread=thread).order_by("pk"):
            checkpoints.load(row)
    with pytest.raises(checkpoints.CheckpointError, match="was altered") as walked:
        checkpoints.summaries(thread)
    assert str(walked.value) == str(loaded.value)
