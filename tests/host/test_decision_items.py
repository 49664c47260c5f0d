"""Decision items: each answered or expired set becomes one timeline event between the suspended and resume runs."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from ag_ui.core import CustomEvent

from observers.agui import FRAGMENT_EVENT_NAME, CustomEventAssembler
from runs.models import TimelineEvent, Verdict
from runs.services.lifecycle import EXPIRY_MESSAGE, Answer, expire_overdue_requests, submit_decisions
from runs.services.timeline import DECISION_EVENT_NAME, REDACTED, ArgumentChange, argument_changes
from tests.support import factories
from tests.support.factories import Suspended, append_events, suspended_execution, text_run_events

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("scenario_tools")]


def decide(suspended: Suspended, operator_user, *answers: Answer):
    return submit_decisions(
        suspended.execution, checkpoint_id=suspended.checkpoint_id, key="k-1", answers=answers, user=operator_user
    )


def decision_events(suspended: Suspended) -> list[TimelineEvent]:
    return list(
        TimelineEvent.objects.filter(
            execution=suspended.execution, event_type="CUSTOM", event__name=DECISION_EVENT_NAME
        )
    )


def test_argument_changes_name_each_edited_added_and_removed_key():
    before = {"amount": 5000, "to": "acme", "meta": {"ref": "a", "tag": "x"}, "note": "n"}
    after = {"amount": 50, "to": "acme", "meta": {"ref": "b", "tag": "x"}, "cc": ["ops"]}

    assert argument_changes(before, after) == (
        ArgumentChange(path="amount", change="changed", before=5000, after=50),
        ArgumentChange(path="meta.ref", change="changed", before="a", after="b"),
        ArgumentChange(path="note", change="removed", before="n"),
        ArgumentChange(path="cc", change="added", after=["ops"]),
    )
    assert argument_changes(before, before) == ()


def test_a_decided_set_is_one_item_after_the_suspended_run_with_who_when_verdicts_diff_and_message(operator_user):
    suspended = suspended_execution()
    append_events(suspended.run, text_run_events(suspended.run, ["thinking"], finish=False))
    last_before = TimelineEvent.objects.filter(execution=suspended.execution).count()

    submission = decide(
        suspended,
        operator_user,
        Answer("call-pay", Verdict.APPROVED, override_args={"amount": 50, "to": "acme"}),
        Answer("call-del", Verdict.DENIED, message="not today"),
    )

    [stored] = decision_events(suspended)
    assert (stored.position, stored.run_id, stored.journal_entry_id) == (last_before + 1, suspended.run.pk, None)
    item = stored.event["value"]
    assert item["decided_by"] == "op"
    assert item["expired"] is False
    assert (item["suspended_run"], item["resume_run"]) == (1, submission.resume_run.number)
    assert stored.event["timestamp"] == int(submission.submitted_at.timestamp() * 1000)
    calls = {call["tool_call_id"]: call for call in item["calls"]}
    assert calls["call-pay"]["verdict"] == Verdict.APPROVED
    assert calls["call-pay"]["args"] == {"amount": 5000, "to": "acme"}
    assert calls["call-pay"]["edits"] == [{"path": "amount", "change": "changed", "before": 5000, "after": 50}]
    assert (calls["call-del"]["verdict"], calls["call-del"]["message"], calls["call-del"]["edits"]) == (
        Verdict.DENIED,
        "not today",
        [],
    )


def test_the_host_s_expiry_is_an_item_by_nobody_marked_expired():
    suspended = suspended_execution(expires_in=timedelta(seconds=-1))

    assert expire_overdue_requests() == 1

    [stored] = decision_events(suspended)
    item = stored.event["value"]
    assert (item["decided_by"], item["expired"]) == (None, True)
    assert {call["verdict"] for call in item["calls"]} == {Verdict.EXPIRED}
    assert {call["message"] for call in item["calls"]} == {EXPIRY_MESSAGE}


def test_values_under_redacted_keys_never_reach_the_item_but_their_edit_still_shows(operator_user):
    factories.configure_policy(redact_patterns=["^to$"])
    suspended = suspended_execution()

    decide(
        suspended,
        operator_user,
        Answer("call-pay", Verdict.APPROVED, override_args={"amount": 5000, "to": "mallory-account"}),
        Answer("call-del", Verdict.DENIED, message="to=acme is not allowed"),
    )

    [stored] = decision_events(suspended)
    text = json.dumps(stored.event)
    assert "acme" not in text and "mallory-account" not in text
    calls = {call["tool_call_id"]: call for call in stored.event["value"]["calls"]}
    assert calls["call-pay"]["args"] == {"amount": 5000, "to": REDACTED}
    assert calls["call-pay"]["edits"] == [{"path": "to", "change": "changed", "before": REDACTED, "after": REDACTED}]
    assert calls["call-del"]["message"] == f"to={REDACTED} is not allowed"


def test_an_item_larger_than_a_custom_event_may_be_is_stored_as_fragments_that_reassemble_to_it(operator_user):
    suspended = suspended_execution()
    long_name = "x" * 60_000  # edited arguments may be 64 KiB, and the item holds them and their diff

    decide(
        suspended,
        operator_user,
        Answer("call-pay", Verdict.APPROVED, override_args={"amount": 50, "to": long_name}),
        Answer("call-del", Verdict.DENIED),
    )

    assert decision_events(suspended) == []
    assembler = CustomEventAssembler()
    stored = TimelineEvent.objects.filter(execution=suspended.execution, event__name=FRAGMENT_EVENT_NAME)
    assert stored.count() > 1
    whole = [assembler.feed(CustomEvent.model_validate(row.event)) for row in stored.order_by("position")][-1]
    assert whole.name == DECISION_EVENT_NAME
    calls = {call["tool_call_id"]: call for call in whole.value["calls"]}
    assert calls["call-pay"]["edits"][-1] == {"path": "to", "change": "changed", "before": "acme", "after": long_name}
