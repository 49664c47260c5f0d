"""A redaction pattern applied to existing executions: an RQ job re-masks their stored masked copies (timeline
events, shown inputs, thread titles) in chunks, with progress; the journal keeps its real values; doing it twice
changes nothing more."""

from __future__ import annotations

import pytest
import redis
from ag_ui.core import CustomEvent
from rq import SimpleWorker

from observers.agui import CustomEventAssembler, fragment_custom_event
from runs.models import JournalEntry, Remask, TimelineEvent
from runs.services.lifecycle import executions, remasking
from runs.services.store import parse_redact_patterns, publish_policy_version, queueing
from runs.services.store.queued_jobs import SERIALIZER, HostJob
from runs.services.timeline import Redactor, TimelineRedactor, dump_event
from runs.services.worker import runner
from tests.support import factories

pytestmark = pytest.mark.django_db

SECRET = "sk-live-0042"


def streamed_secret_execution(thread=None):
    """An execution stored under a version without patterns: its streamed text holds `api_key: <secret>`, the key
    and the value in different deltas."""
    execution = factories.make_execution(thread, status="completed", input=f"use api_key={SECRET} please")
    run = factories.make_run(execution, status="completed")
    factories.append_events(
        run, factories.text_run_events(run, ["Calling with api_", f"key: {SECRET[:6]}", f"{SECRET[6:]} now"])
    )
    return execution


def add_pattern(*patterns: str):
    policy = factories.policy_version().policy
    publish_policy_version(policy, created_by=None, comment="test", redact_patterns=list(patterns))
    policy.refresh_from_db()
    return policy


def run_queued_jobs(redis_settings) -> None:
    """Run what the queue holds in this process, as a worker would."""
    connection = redis.Redis.from_url(redis_settings.url)
    queue = queueing.host_queue(connection=connection)
    SimpleWorker([queue], connection=connection, job_class=HostJob, serializer=SERIALIZER).work(burst=True)


def stored_text(execution) -> str:
    return " ".join(str(event) for event in execution.timeline.order_by("position").values_list("event", flat=True))


def test_a_new_pattern_reaches_existing_executions_through_the_queued_job(
    redis_settings, admin_user, django_capture_on_commit_callbacks
):
    executions_before = [streamed_secret_execution() for _ in range(3)]
    assert SECRET[6:] in stored_text(executions_before[0])
    policy = add_pattern("api_key")

    with django_capture_on_commit_callbacks(execute=True):
        remask = remasking.start(policy, admin_user)
    assert (remask.total, remask.done, remask.started_by) == (3, 0, admin_user)
    run_queued_jobs(redis_settings)

    remask.refresh_from_db()
    assert remasking.progress(remask) == {"done": 3, "total": 3, "finished": True, "changed_events": 6}
    for execution in executions_before:
        execution.refresh_from_db()
        assert SECRET[:6] not in stored_text(execution) and SECRET[6:] not in stored_text(execution)
        assert "[redacted]" in stored_text(execution)
        assert execution.shown_input == "use api_key=[redacted] please"
        assert SECRET in execution.input  # the real input stays for the run


def test_starting_again_while_unfinished_sends_its_job_again_and_counts_each_execution_once(
    redis_settings, admin_user, django_capture_on_commit_callbacks
):
    streamed_secret_execution(), streamed_secret_execution()
    policy = add_pattern("api_key")

    with django_capture_on_commit_callbacks(execute=True):
        first = remasking.start(policy, admin_user)
    with django_capture_on_commit_callbacks(execute=True):
        again = remasking.start(policy, admin_user)  # as if its job had been lost
    assert again == first
    assert queueing.host_queue(connection=redis.Redis.from_url(redis_settings.url)).count == 2
    run_queued_jobs(redis_settings)

    first.refresh_from_db()
    assert remasking.progress(first) == {"done": 2, "total": 2, "finished": True, "changed_events": 4}
    assert Remask.objects.count() == 1


def test_a_key_split_across_chunks_is_masked_as_in_one(redis_settings, admin_user, monkeypatch):
    whole, split = streamed_secret_execution(), streamed_secret_execution()
    policy = add_pattern("api_key")
    remask = remasking.start(policy, admin_user)

    monkeypatch.setattr(remasking, "CHUNK_ROWS", 2)
    remasking.run(remask.pk)

    texts = [[e["delta"] for e in x.timeline.values_list("event", flat=True) if "delta" in e] for x in (whole, split)]
    assert texts[0] == texts[1] == ["Calling with api_", "key: [redacted]", " now"]


def test_the_journal_keeps_real_values_and_a_second_run_changes_nothing(admin_user):
    thread = factories.thread(model="demo", tools=["lookup_record"])
    execution = executions.start_execution(thread, "look up REC-42")
    assert runner.execute_run(execution.runs.get().pk) == "completed"
    journal = list(JournalEntry.objects.filter(run__execution=execution).values_list("payload", flat=True))
    assert any("REC-42" in payload for payload in journal)
    assert "REC-42" in stored_text(execution)
    policy = executions.current_policy_version().policy
    publish_policy_version(policy, created_by=None, comment="test", redact_patterns=["record_id"])
    policy.refresh_from_db()

    first = remasking.start(policy, admin_user)
    assert remasking.start(policy, admin_user) == first  # one unfinished re-mask per policy
    remasking.run(first.pk)
    remasking.run(first.pk)  # the same job again (a retry): the cursor has passed every execution
    first.refresh_from_db()
    masked = stored_text(execution)
    events = dict(TimelineEvent.objects.filter(execution=execution).values_list("pk", "event"))

    assert (first.done, first.total) == (1, 1) and first.changed_events > 0
    # The value under the key is masked; the same text elsewhere (the prompt, the result) is under no key.
    assert '"record_id": "REC-42"' not in masked and '"record_id": "[redacted]"' in masked
    assert list(JournalEntry.objects.filter(run__execution=execution).values_list("payload", flat=True)) == journal

    second = remasking.start(policy, admin_user)
    assert second != first
    remasking.run(second.pk)
    second.refresh_from_db()
    assert (second.done, second.changed_events) == (1, 0)
    assert dict(TimelineEvent.objects.filter(execution=execution).values_list("pk", "event")) == events


def test_executions_started_after_it_and_of_other_policies_are_left_alone(admin_user):
    before = streamed_secret_execution()
    policy = add_pattern("api_key")
    remask = remasking.start(policy, admin_user)
    later = streamed_secret_execution()  # stored here unmasked to show the scope, not what a real run stores

    remasking.run(remask.pk)

    assert SECRET[6:] not in stored_text(before)
    assert SECRET[6:] in stored_text(later)
    remask.refresh_from_db()
    assert (remask.done, remask.total) == (1, 1)


def test_a_policy_without_patterns_has_nothing_to_apply(admin_user):
    streamed_secret_execution()
    with pytest.raises(remasking.RemaskRefused):
        remasking.start(factories.policy_version().policy, admin_user)
    assert not Remask.objects.exists()


def test_an_oversized_custom_events_pieces_are_masked_as_one_event_and_kept_when_nothing_changes():
    event = CustomEvent(name="tool_output", value={"api_key": SECRET, "blob": "x" * 60_000})
    pieces = [dump_event(piece) for piece in fragment_custom_event(event, "frag-1")]
    assert len(pieces) > 2
    redactor = Redactor(parse_redact_patterns(["api_key"]))

    assert TimelineRedactor(redactor).remask(pieces[:2]) == ([], 0)  # a chunk ending mid-event leaves it whole
    masked, taken = TimelineRedactor(redactor).remask(pieces)

    assert taken == len(pieces) == len(masked)
    assert [piece["value"]["index"] for piece in masked] == [piece["value"]["index"] for piece in pieces]
    assembler = CustomEventAssembler()
    (whole,) = [e for e in (assembler.feed(CustomEvent.model_validate(piece)) for piece in masked) if e is not None]
    assert whole.value == {"api_key": "[redacted]", "blob": "x" * 60_000}
    assert TimelineRedactor(redactor).remask(masked) == (masked, len(masked))
