"""The source journal, its codec, and the projection written beside it."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.db import IntegrityError, connection
from django.utils import timezone
from pydantic_ai import ModelRequest, ModelResponse, ToolCallPart, UserPromptPart
from pydantic_ai.messages import FunctionToolCallEvent, PartStartEvent, TextPart

from runs.harness import (
    CODEC_VERSION,
    CodecError,
    DeferredToolCall,
    HarnessEvent,
    HarnessRunResult,
    HarnessRunResultEvent,
    HarnessState,
    InlineDelegationPayload,
    PendingDeferredCalls,
    SafeFailure,
    decode_item,
    encode_item,
)
from runs.models import JournalEntry, Run, TimelineEvent
from runs.services.store import journal, leases
from runs.services.timeline import RunProjection
from tests.support import factories

pytestmark = pytest.mark.django_db


def _thread_id(run: Run) -> str:
    return run.execution.thread.thread_id


def _journal_rows(run: Run) -> list[tuple[int, str, int]]:
    return list(run.journal.values_list("index", "source_run_id", "source_sequence"))


# -- codec -------------------------------------------------------------------------------------------------


def test_codec_round_trips_native_extension_and_result_items():
    thread_id = HarnessState.new().thread_id
    call = ToolCallPart("notify", {"text": "hi"}, tool_call_id="call-1")
    deferred = PendingDeferredCalls(approvals=[DeferredToolCall(call, call, "tool/native/notify")])
    state = HarnessState.new(thread_id=thread_id)
    items = [
        *factories.text_items(thread_id),
        HarnessEvent(thread_id, factories.RUN_ID, 4, factories.now(), FunctionToolCallEvent(part=call)),
        HarnessRunResultEvent(
            thread_id,
            factories.RUN_ID,
            5,
            factories.now(),
            HarnessRunResult(
                thread_id=thread_id,
                run_id=factories.RUN_ID,
                status="suspended",
                state=state,
                suspend_reason="deferred",
                deferred=deferred,
            ),
        ),
    ]
    for item in items:
        stored = encode_item(item)
        assert stored.codec_version == CODEC_VERSION
        back = decode_item(stored.payload, stored.codec_version)
        if isinstance(item, HarnessRunResultEvent):
            assert back.result == item.result
            assert back.result.deferred == deferred
        else:
            assert back == item


def test_a_result_item_carries_its_state_as_the_text_the_state_keeps():
    thread_id = HarnessState.new().thread_id
    history = [ModelRequest(parts=[UserPromptPart("naïve question")]), ModelResponse(parts=[TextPart("answer")])]
    state = HarnessState.new(thread_id=thread_id, message_history=history)
    result = HarnessRunResult(
        thread_id=thread_id, run_id=factories.RUN_ID, status="completed", output="ok", state=state
    )
    stored = encode_item(HarnessRunResultEvent(thread_id, factories.RUN_ID, 0, factories.now(), result))
    assert state.model_dump_json() in stored.payload
    back = decode_item(stored.payload, stored.codec_version)
    assert back.result == result and back.result.state.message_history == state.message_history


def test_a_result_stored_with_a_checkpointed_state_needs_that_state_to_be_read():
    thread_id = HarnessState.new().thread_id
    state = HarnessState.new(thread_id=thread_id, message_history=[ModelRequest(parts=[UserPromptPart("question")])])
    result = HarnessRunResult(
        thread_id=thread_id, run_id=factories.RUN_ID, status="completed", output="ok", state=state
    )
    stored = encode_item(
        HarnessRunResultEvent(thread_id, factories.RUN_ID, 0, factories.now(), result), state_checkpointed=True
    )
    assert "question" not in stored.payload
    with pytest.raises(CodecError, match="keeps its state in a checkpoint"):
        decode_item(stored.payload, stored.codec_version)
    assert decode_item(stored.payload, stored.codec_version, checkpointed_state=lambda: state).result == result
    # A version-2 row holds its state inline and is read as it is.
    inline = encode_item(HarnessRunResultEvent(thread_id, factories.RUN_ID, 0, factories.now(), result))
    assert decode_item(inline.payload, 2).result == result


def test_codec_keeps_failures_and_names_items_by_kind():
    thread_id = HarnessState.new().thread_id
    failure = SafeFailure(code="agent_run_failed", message="The agent run failed.", details={"error_type": "X"})
    result = HarnessRunResult(thread_id=thread_id, run_id=factories.RUN_ID, status="failed", failure=failure)
    stored = encode_item(HarnessRunResultEvent(thread_id, factories.RUN_ID, 7, factories.now(), result))
    assert stored.kind == "result.failed"
    assert decode_item(stored.payload, stored.codec_version).result.failure == failure
    started = encode_item(factories.text_items(thread_id)[0])
    assert started.kind == "harness.lifecycle.run_started"


def test_codec_reads_version_1_items():
    thread_id = HarnessState.new().thread_id
    occurred = factories.now()
    v1_extension = {
        "item": "extension",
        "thread_id": thread_id,
        "run_id": factories.RUN_ID,
        "sequence": 0,
        "occurred_at": occurred.isoformat(),
        "data": {"kind": "lifecycle", "payload": {"type": "run_started"}},
    }
    item = decode_item(json.dumps(v1_extension), 1)
    assert item == factories.text_items(thread_id)[0].__class__(
        thread_id, factories.RUN_ID, 0, occurred, factories.text_items(thread_id)[0].event
    )
    native = json.loads(encode_item(factories.text_items(thread_id)[1]).payload)
    v1_native = {**{k: native[k] for k in ("thread_id", "run_id", "sequence", "occurred_at")}, "item": "event"}
    v1_native["data"] = native["body"]["event"]
    assert decode_item(json.dumps(v1_native), 1).event == PartStartEvent(index=0, part=TextPart(content="Hello"))


@pytest.mark.parametrize(
    ("payload", "version", "message"),
    [
        ("{not json", CODEC_VERSION, "undecodable journal item"),
        (
            '{"thread_id": "t", "run_id": "r", "sequence": 0, "occurred_at": "2026-01-01T00:00:00Z", '
            '"body": {"source": "native", "event": {"event_kind": "no_such_event"}}}',
            CODEC_VERSION,
            "undecodable",
        ),
        ("{}", CODEC_VERSION + 1, "codec version"),
    ],
)
def test_codec_refuses_undecodable_items_clearly(payload, version, message):
    with pytest.raises(CodecError, match=message):
        decode_item(payload, version)


# -- append ------------------------------------------------------------------------------------------------


def test_append_numbers_items_in_order_and_projects_them_in_the_same_transaction():
    run, lease = factories.leased_run()
    items = factories.text_items(_thread_id(run))
    RunProjection(run).record(items[:2], lease=lease)
    assert _journal_rows(run) == [(0, factories.RUN_ID, 0), (1, factories.RUN_ID, 1)]
    positions = list(TimelineEvent.objects.filter(run=run).values_list("position", "event_type"))
    assert positions == [(1, "RUN_STARTED"), (2, "TEXT_MESSAGE_START"), (3, "TEXT_MESSAGE_CONTENT")]
    assert all(event.journal_entry_id is not None for event in TimelineEvent.objects.filter(run=run))


def test_inline_child_items_keep_their_own_sequences():
    run, lease = factories.leased_run()
    thread_id = _thread_id(run)
    child_thread = HarnessState.new().thread_id
    child_run = "run-" + "c" * 32
    payload = InlineDelegationPayload(
        invocation_id="delegation-" + "d" * 32,
        action="started",
        child_instance_id="child",
        subagent="helper",
        status="running",
        parent_run_id=factories.RUN_ID,
        parent_agent_instance_id="root",
        child_run_id=child_run,
    )
    items = [
        factories.text_items(thread_id)[0],
        factories.text_items(child_thread, child_run)[0],
        HarnessEvent(child_thread, child_run, 1, factories.now(), payload.to_event()),
        factories.text_items(thread_id)[1],
    ]
    journal.append(run, items, lease=lease)
    assert _journal_rows(run) == [
        (0, factories.RUN_ID, 0),
        (1, child_run, 0),
        (2, child_run, 1),
        (3, factories.RUN_ID, 1),
    ]


def test_append_refuses_a_gap_and_changes_nothing():
    run, lease = factories.leased_run()
    items = factories.text_items(_thread_id(run))
    journal.append(run, items[:2], lease=lease)
    with pytest.raises(journal.JournalError, match=r"journal gap .* expected sequence 2, got 3"):
        journal.append(run, [items[3]], lease=lease)
    assert _journal_rows(run) == [(0, factories.RUN_ID, 0), (1, factories.RUN_ID, 1)]


def test_append_refuses_a_repeated_sequence_and_changes_nothing():
    run, lease = factories.leased_run()
    items = factories.text_items(_thread_id(run))
    journal.append(run, items[:3], lease=lease)
    with pytest.raises(journal.JournalError, match=r"journal duplicate .* sequence 1 is already recorded"):
        journal.append(run, [items[1]], lease=lease)
    # A batch whose later item repeats an earlier one is refused whole.
    with pytest.raises(journal.JournalError, match="duplicate"):
        journal.append(run, [items[3], items[3]], lease=lease)
    assert [row[0] for row in _journal_rows(run)] == [0, 1, 2]


def test_append_refuses_an_item_that_cannot_be_encoded():
    run, lease = factories.leased_run()

    class Opaque:
        event_kind = "opaque"

    bad = HarnessEvent(_thread_id(run), factories.RUN_ID, 0, factories.now(), Opaque())
    with pytest.raises(CodecError, match="not a pydantic-ai stream event"):
        journal.append(run, [bad], lease=lease)
    assert not JournalEntry.objects.exists()


def test_write_with_an_expired_lease_is_refused_and_changes_nothing():
    run, lease = factories.leased_run()
    items = factories.text_items(_thread_id(run))
    RunProjection(run).record(items[:1], lease=lease)
    Run.objects.filter(pk=run.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    with pytest.raises(leases.LeaseLost, match="lease is expired or was taken over"):
        RunProjection(run).record(items[1:2], lease=lease)
    assert _journal_rows(run) == [(0, factories.RUN_ID, 0)]
    assert TimelineEvent.objects.filter(run=run).count() == 1


def test_write_after_the_lease_was_taken_over_is_refused():
    run, lease = factories.leased_run()
    stale = leases.Lease(run_pk=lease.run_pk, execution_pk=lease.execution_pk, token="0" * 32, seconds=30)
    with pytest.raises(leases.LeaseLost):
        journal.append(run, factories.text_items(_thread_id(run))[:1], lease=stale)
    with pytest.raises(leases.LeaseLost):
        leases.renew(stale)
    assert not JournalEntry.objects.exists()


# -- reading -----------------------------------------------------------------------------------------------


async def _collect(iterable):
    return [item async for item in iterable]


def test_read_prefix_yields_the_exact_prefix_and_everything_through_the_terminal_item():
    from asgiref.sync import async_to_sync

    run, lease = factories.leased_run()
    thread_id = _thread_id(run)
    items = [*factories.text_items(thread_id), factories.completed(thread_id, factories.RUN_ID, 4)]
    journal.append(run, items, lease=lease)
    prefix = async_to_sync(_collect)(journal.read_prefix(run, through=1))
    assert prefix == items[:2]
    rest = async_to_sync(_collect)(journal.read_prefix(run))[2:]
    assert rest[:2] == items[2:4]
    assert isinstance(rest[2], HarnessRunResultEvent) and rest[2].result == items[4].result


def test_reading_an_undecodable_item_is_a_clear_error():
    from asgiref.sync import async_to_sync

    run, lease = factories.leased_run()
    journal.append(run, factories.text_items(_thread_id(run))[:2], lease=lease)
    JournalEntry.objects.filter(run=run, index=1).update(payload='{"broken": true}')
    with pytest.raises(CodecError, match="undecodable journal item"):
        async_to_sync(_collect)(journal.read_prefix(run))


def test_one_projection_keeps_numbering_across_batches_and_rereads_after_a_refused_one():
    run, lease = factories.leased_run()
    thread_id = _thread_id(run)
    items = [*factories.text_items(thread_id), factories.completed(thread_id, factories.RUN_ID, 4)]
    projection = RunProjection(run)
    projection.record(items[:1], lease=lease)
    with pytest.raises(journal.JournalError, match="journal gap"):
        projection.record(items[2:3], lease=lease)
    # Another writer's rows (here: the same items through a fresh projection) are picked up afterwards.
    RunProjection(run).record(items[1:2], lease=lease)
    projection.record(items[2:], lease=lease)
    assert [row[0] for row in _journal_rows(run)] == [0, 1, 2, 3, 4]
    positions = list(TimelineEvent.objects.filter(run=run).values_list("position", flat=True))
    assert positions == list(range(1, len(positions) + 1))


def test_a_row_the_database_refuses_is_a_django_integrity_error_and_changes_nothing():
    run, lease = factories.leased_run()
    items = factories.text_items(_thread_id(run))
    stale = RunProjection(run)
    stale.record(items[:1], lease=lease)
    # Another writer took index 1: the stale projection's cursor still says 0, so only the unique constraint of
    # the journal (the backstop behind the lease) refuses its row.
    RunProjection(run).record(items[1:2], lease=lease)
    stored = (_journal_rows(run), TimelineEvent.objects.count())
    with pytest.raises(IntegrityError):
        stale.record(items[1:2], lease=lease)
    assert (_journal_rows(run), TimelineEvent.objects.count()) == stored


def test_live_frames_are_the_frames_a_replay_reads(django_capture_on_commit_callbacks, settings):
    from channels.layers import get_channel_layer

    from runs.services.timeline import frames_after
    from tests.support import recording_layer

    settings.CHANNEL_LAYERS = {"default": {"BACKEND": recording_layer.BACKEND}}
    run, lease = factories.leased_run()
    with django_capture_on_commit_callbacks(execute=True):
        RunProjection(run).record(factories.text_items(_thread_id(run)), lease=lease)
    ((_, message),) = get_channel_layer().sent
    replayed = frames_after(run.execution_id, 0)
    if connection.vendor == "sqlite":
        # The very text the projection encoded; PostgreSQL's jsonb renders the same value in its own text.
        assert message["frames"] == replayed
    decoded = [
        [{**frame, "event_json": json.loads(frame["event_json"])} for frame in frames]
        for frames in (message["frames"], replayed)
    ]
    assert decoded[0] == decoded[1]


def test_read_prefix_reads_across_pages(monkeypatch):
    from asgiref.sync import async_to_sync

    monkeypatch.setattr(journal, "PAGE_SIZE", 2)
    run, lease = factories.leased_run()
    thread_id = _thread_id(run)
    items = [*factories.text_items(thread_id), factories.completed(thread_id, factories.RUN_ID, 4)]
    journal.append(run, items, lease=lease)
    assert async_to_sync(_collect)(journal.read_prefix(run, through=3)) == items[:4]
    assert len(async_to_sync(_collect)(journal.read_prefix(run))) == 5
