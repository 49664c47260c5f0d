"""The redaction boundary: secrets in text, JSON, streamed deltas and every stored event type are masked."""

from __future__ import annotations

import importlib
import json
import re
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

import pytest
from ag_ui.core import (
    CustomEvent,
    Interrupt,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    TextMessageContentEvent,
    TextMessageEndEvent,
    ToolCallArgsEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from django.apps import apps
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic_ai import ToolCallPart

from agui_api.answers import interrupt_of
from observers.agui import FRAGMENT_EVENT_NAME, CustomEventAssembler, fragment_custom_event
from runs.models import Decision
from runs.services.lifecycle import current_policy_version
from runs.services.store import parse_redact_patterns
from runs.services.timeline import (
    REDACTED,
    Produced,
    Redactor,
    TimelineRedactor,
    dump_event,
    restore_redacted,
)
from runs.services.timeline.redaction import MAX_KEY_CHARS
from tests.support import factories
from tests.support.factories import suspended_execution
from tests.support.property_examples import examples

SECRETS = Redactor(parse_redact_patterns(["pass(word)?", "token", "^api[_-]?key$"]))
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def stored(*events, secrets: Redactor = SECRETS):
    """What the timeline stores for these events of one run, in order."""
    redactor = TimelineRedactor(secrets)
    produced = [Produced(None, NOW, event, f"frag-{index}") for index, event in enumerate(events, start=1)]
    return [dumped for _, _, dumped in redactor.events(produced)]


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ('Config: {"password": "s3cret"}', 'Config: {"password": "[redacted]"}'),
        ('creds:{"password":"s3cret"}', 'creds:{"password":"[redacted]"}'),
        ("Here: password: s3cret", "Here: password: [redacted]"),
        ("use token=abc&user=ann", "use token=[redacted]&user=ann"),
        ("pw 'passwd': 'two words' ok", "pw 'passwd': '[redacted]' ok"),
        ('say {\\"password\\": \\"s3cret\\"}', 'say {\\"password\\": \\"[redacted]\\"}'),
        ('"api_key": {"a": [1, "x}"]}, "b": 2', '"api_key": "[redacted]", "b": 2'),
    ],
)
def test_secrets_inside_one_string_are_masked(text, masked):
    assert SECRETS.text(text) == masked


def test_json_text_is_masked_structurally_and_stays_json():
    text = '{"user": "ann", "password": "hunter2", "nested": {"API_KEY": 7, "note": "token: abc"}}'

    assert json.loads(SECRETS.text(text)) == {
        "user": "ann",
        "password": REDACTED,
        "nested": {"API_KEY": REDACTED, "note": f"token: {REDACTED}"},
    }


def test_text_without_secrets_is_returned_as_it_was():
    assert SECRETS.text('{"user":  "ann"}') == '{"user":  "ann"}'
    assert Redactor(()).text("password: s3cret") == "password: s3cret"


@pytest.mark.parametrize(
    "deltas",
    [
        ['{"pass', 'word": "s3', "cr", 'et", "user": "ann"}'],
        ['{"password"', ": ", '"s3cret"', ', "user": "ann"}'],
        ['{"password": ', '"s3\\', '"cret", "user": "ann"}'],
        ['{"token": ', "12", "34", ', "user": "ann"}'],
    ],
)
def test_a_key_and_its_value_split_across_argument_deltas_are_masked_and_the_json_survives(deltas):
    events = [ToolCallArgsEvent(tool_call_id="c1", delta=delta) for delta in deltas]

    shown = "".join(event["delta"] for event in stored(*events))

    assert "cret" not in shown and "34" not in shown
    assert json.loads(shown)["user"] == "ann"
    assert REDACTED in json.loads(shown).values()


def test_text_split_across_message_deltas_is_masked_and_streams_stay_apart():
    events = [
        TextMessageContentEvent(message_id="m1", delta="Here: pass"),
        TextMessageContentEvent(message_id="m2", delta="password"),
        TextMessageContentEvent(message_id="m1", delta="word:"),
        TextMessageContentEvent(message_id="m1", delta=" hun"),
        TextMessageContentEvent(message_id="m1", delta="ter2 and more"),
        TextMessageContentEvent(message_id="m2", delta=" is a word"),
        TextMessageEndEvent(message_id="m1"),
    ]

    deltas = [event.get("delta") for event in stored(*events)]

    by_message = {"m1": "".join(d for d, e in zip(deltas, events, strict=True) if e.message_id == "m1" and d)}
    assert by_message["m1"] == f"Here: password: {REDACTED} and more"
    assert deltas[5] == " is a word"


MEGABYTE = 1_000_000
ADVERSARIAL = {
    "word characters": "a" * MEGABYTE,
    "words joined by dashes": "a-" * (MEGABYTE // 2),
    "dashes": "-" * MEGABYTE,
    "dots": "." * MEGABYTE,
    "digits before a letter": "1" * MEGABYTE + "a",
    "keys after keys": "a=" * (MEGABYTE // 2),
    "quotes": '"' * MEGABYTE,
    "escaped quotes": '\\"' * (MEGABYTE // 2),
    "quoted keys without a separator": '"a"' * (MEGABYTE // 3),
    "a key and spaces": "a" + " " * MEGABYTE,
    "opening brackets": "[" * MEGABYTE,
}
# The key as first written, tried from every position: what it finds defines a key; it costs the square of a run.
PLAIN_KEY = re.compile(r"""(?P<q>\\?["']|)(?P<key>[A-Za-z_][\w.-]*)(?P=q)\s*[:=]\s*""")
PIECES = ["a", "Z", "_", "9", "٣", "é", ".", "-", "=", ":", " ", "\n", '"', "'", "\\", "{", "}", "[", "]", ","]


@contextmanager
def finishing_within(seconds: int) -> Iterator[None]:
    """Fails the block if it still runs after `seconds`: SIGALRM interrupts even a running regex search."""

    def expire(signum: int, frame: object) -> None:
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("text", ADVERSARIAL.values(), ids=ADVERSARIAL.keys())
def test_masking_a_megabyte_of_adversarial_text_takes_linear_work(text):
    """Not a timing: a key searched from every position of a run took hours on a megabyte (40k: 19 s); linear
    work takes about a second, far inside the guard."""
    with finishing_within(60):
        assert SECRETS.text(text) == text
    with finishing_within(60):
        assert SECRETS.text(f"token=s3cret {text}") == f"token={REDACTED} {text}"


def test_a_policy_pattern_is_never_searched_over_a_key_longer_than_any_name():
    """`api.*key` costs the square of the key it searches, and a key in text is a whole run of key characters:
    a key longer than MAX_KEY_CHARS is judged secret without a search (masking more, never less)."""
    quadratic = Redactor(parse_redact_patterns(["api.*key"]))
    long_key = "api" * (MEGABYTE // 3)
    with finishing_within(60):
        assert quadratic.text(f"{long_key}=s3cret and more") == f"{long_key}={REDACTED} and more"
    at_most = "x" * MAX_KEY_CHARS
    shown = quadratic.value({at_most: 1, at_most + "x": 2, "api_key": 3})
    assert shown == {at_most: 1, at_most + "x": REDACTED, "api_key": REDACTED}
    assert Redactor(()).value({at_most + "x": 2}) == {at_most + "x": 2}


@settings(max_examples=examples(500), deadline=None)
@given(
    text=st.lists(st.sampled_from([*PIECES, "pass", "token", "api_key", "k"]), max_size=40).map("".join),
    cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=4),
)
def test_the_linear_key_finds_exactly_what_a_search_from_every_position_finds(text, cuts):
    """In one text and in deltas cut anywhere: the anchored, possessive key changes the cost, not the result."""
    cuts = sorted({cut for cut in cuts if 0 < cut < len(text)})
    deltas = [text[start:end] for start, end in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    events = [TextMessageContentEvent(message_id="m1", delta=delta) for delta in deltas if delta]

    def shown(secrets: Redactor) -> tuple[str, list[str]]:
        return secrets.text(text), [event["delta"] for event in stored(*events, secrets=secrets)]

    expected = shown(Redactor(SECRETS.patterns, key_pattern=PLAIN_KEY))
    assert shown(SECRETS) == expected


def test_text_and_values_nested_deeper_than_the_stack_are_masked_not_an_error():
    """JSON in text is masked structurally; nested beyond the recursion limit, it is masked as text instead
    (a 1,200-character input was enough to fail a page or a run)."""
    brackets = "[" * 600 + '{"token": "s3cret"}' + "]" * 600
    assert SECRETS.text(brackets) == "[" * 600 + f'{{"token": "{REDACTED}"}}' + "]" * 600
    assert SECRETS.text("[" * MEGABYTE) == "[" * MEGABYTE
    nested: list = []
    innermost = nested
    for _ in range(5000):
        innermost.append([])
        innermost = innermost[0]
    assert SECRETS.value({"rows": nested, "token": "s3cret"}) == REDACTED


def test_every_event_type_is_masked_but_ids_names_and_envelopes_are_kept():
    call = {"tool_name": "login", "args": '{"password": "s3cret"}', "tool_call_id": "c1"}
    envelope = {"thread_id": "t", "run_id": "r", "sequence": 4, "occurred_at": "x", "event": {"part": call}}
    interrupt = Interrupt(id="c1", reason="approval", metadata={"tool_name": "login", "args": {"password": "s3cret"}})
    events = [
        ToolCallStartEvent(tool_call_id="c1", tool_call_name="password_reset"),
        ToolCallResultEvent(message_id="m", tool_call_id="c1", content='{"session_token": "s3cret", "ok": true}'),
        CustomEvent(name="a13n.pydantic_ai.function_tool_call", value=envelope),
        RunFinishedEvent(thread_id="t", run_id="r", outcome=RunFinishedInterruptOutcome(interrupts=[interrupt])),
        RunFinishedEvent(thread_id="t", run_id="r", result={"passwd": "s3cret", "list": [{"token": 1}]}),
        RunErrorEvent(message="bad password=s3cret", code="E", raw_event={"failure": {"message": "token: s3cret"}}),
    ]

    start, result, custom, interrupted, finished, error = stored(*events)

    assert "s3cret" not in json.dumps([result, custom, interrupted, finished, error])
    assert start == dump_event(events[0])
    assert json.loads(result["content"]) == {"session_token": REDACTED, "ok": True}
    assert custom["name"] == "a13n.pydantic_ai.function_tool_call"
    assert custom["value"]["event"]["part"] == {**call, "args": '{"password": "[redacted]"}'}
    assert {key: custom["value"][key] for key in ("thread_id", "run_id", "sequence")} == {
        "thread_id": "t",
        "run_id": "r",
        "sequence": 4,
    }
    (shown_interrupt,) = interrupted["outcome"]["interrupts"]
    assert shown_interrupt["id"] == "c1" and shown_interrupt["metadata"]["args"] == {"password": REDACTED}
    assert finished["result"] == {"passwd": REDACTED, "list": [{"token": REDACTED}]}
    assert (error["message"], error["code"]) == (f"bad password={REDACTED}", "E")


def test_an_oversized_custom_event_is_masked_whole_and_sent_as_fragments_again():
    big = CustomEvent(name="a13n.pydantic_ai.function_tool_result", value={"rows": ["x" * 5000] * 12, "token": "s3"})
    fragments = fragment_custom_event(big, "frag-1")
    assert len(fragments) > 1 and all(frame.value["id"] == "frag-1" for frame in fragments)

    frames = stored(big)

    assert all(frame["name"] == FRAGMENT_EVENT_NAME for frame in frames)
    assembler = CustomEventAssembler()
    whole = [event for frame in frames if (event := assembler.feed(CustomEvent.model_validate(frame)))]
    assert [event.value["token"] for event in whole] == [REDACTED]


def test_an_approver_leaving_masked_values_as_shown_approves_the_real_ones():
    original = {"password": "s3cret", "note": "token: abc", "host": "db1", "tags": ["token=t1"]}
    shown = SECRETS.value(original)
    assert shown == {"password": REDACTED, "note": f"token: {REDACTED}", "host": "db1", "tags": [f"token={REDACTED}"]}

    assert restore_redacted(shown, original, SECRETS) == original
    assert restore_redacted({**shown, "host": "db2"}, original, SECRETS) == {**original, "host": "db2"}
    assert restore_redacted({**shown, "password": "new"}, original, SECRETS)["password"] == "new"


@pytest.mark.django_db
def test_the_approval_form_shows_masked_arguments_and_an_edit_keeps_what_was_left_masked(client, operator_user):
    factories.configure_policy(redact_patterns=["password"])
    call = ToolCallPart("send_payment", {"amount": 5000, "to": "acme password=s3cret"}, tool_call_id="call-pay")
    suspended = suspended_execution(approvals=(call,))
    client.force_login(operator_user)
    url = f"/executions/{suspended.execution.pk}/approvals/"

    form = client.get(url).content.decode()
    posted = client.post(
        url,
        {
            "checkpoint": suspended.checkpoint_id,
            "submission_key": "masked-edit",
            "decision-0-id": "call-pay",
            "decision-0-choice": "edit",
            "decision-0-args": json.dumps({"amount": 10, "to": f"acme password={REDACTED}"}),
        },
        HTTP_ACCEPT="application/json",
    )

    assert "s3cret" not in form and f"acme password={REDACTED}" in form
    assert "The policy hides the values shown as [redacted]" in form
    assert posted.status_code == 200, posted.content
    decision = Decision.objects.get(request__tool_call_id="call-pay")
    assert decision.approved_args == {"amount": 10, "to": "acme password=s3cret"}


@pytest.mark.django_db
def test_the_agui_endpoint_describes_a_request_without_its_secret():
    factories.configure_policy(redact_patterns=["password"])
    call = ToolCallPart("send_payment", {"amount": 1, "to": "password=s3cret"}, tool_call_id="call-pay")
    request = suspended_execution(approvals=(call,)).requests["call-pay"]
    request.reason = ""

    described = interrupt_of(request, Interrupt(id="call-pay", reason="approval"))

    assert "s3cret" not in described.message and f"password={REDACTED}" in described.message


@pytest.mark.django_db
def test_the_migration_masks_rows_stored_before_the_boundary_and_keeps_their_positions():
    remask = importlib.import_module("runs.migrations.0009_remask_timeline").remask_timelines
    factories.configure_policy(redact_patterns=["password"])
    execution = factories.make_execution()
    execution.policy_version = current_policy_version()
    execution.save(update_fields=["policy_version"])
    run = factories.make_run(execution)
    big = CustomEvent(name="a13n.pydantic_ai.function_tool_result", value={"rows": ["x" * 5000] * 12, "password": "s3"})
    old = factories.append_events(
        run,
        [
            TextMessageContentEvent(message_id="m1", delta="my pass"),
            TextMessageContentEvent(message_id="m1", delta="word: hun"),
            TextMessageContentEvent(message_id="m1", delta="ter2 ok"),
            CustomEvent(name="a13n.pydantic_ai.function_tool_call", value={"args": {"password": "hunter2"}}),
            *fragment_custom_event(big, "frag-1"),
        ],
    )

    remask(apps, None)
    remask(apps, None)

    rows = list(run.timeline.order_by("position"))
    assert [row.position for row in rows] == [row.position for row in old]
    assert "".join(row.event.get("delta", "") for row in rows[:3]) == f"my password: {REDACTED} ok"
    assert rows[3].event["value"] == {"args": {"password": REDACTED}}
    assembler = CustomEventAssembler()
    (whole,) = [event for row in rows[4:] if (event := assembler.feed(CustomEvent.model_validate(row.event)))]
    assert whole.value["password"] == REDACTED and whole.value["rows"] == big.value["rows"]
