"""An oversized CUSTOM event is masked whole and cut into fragments once, and the timeline stores what it stored
when the observer cut it, the redactor put it together, masked it and cut it again."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Sequence
from typing import Any

import pytest
from ag_ui.core import CustomEvent
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from observers.agui import (
    FRAGMENT_EVENT_NAME,
    CustomEventAssembler,
    HarnessAguiStreamObserver,
    fragment_custom_event,
    fragment_id,
)
from runs.harness import HarnessEvent, HarnessExtensionEvent
from runs.models import Run, TimelineEvent
from runs.protocol import encode_event
from runs.services.lifecycle import current_policy_version
from runs.services.store import parse_redact_patterns
from runs.services.timeline import Produced, Redactor, RunProjection, TimelineRedactor, dump_event
from tests.support import factories
from tests.support.generated_runs import generated_runs
from tests.support.property_examples import examples

# Keys the harness does not mask in extension payloads itself (it masks `password`, `token` and the like).
PATTERNS = ["pass(word|phrase)?", "^pin$", "^args$", "content"]
SECRETS = Redactor(parse_redact_patterns(PATTERNS))
NOTHING = Redactor(())

BIG_PAYLOADS: tuple[dict[str, Any], ...] = (
    # Masked and still too large: cut into fragments after masking.
    {"rows": ["x" * 5000] * 12, "passphrase": "s3cret", "note": "passphrase=hunter2 and more", "ratio": 1.5e-7},
    # Masking leaves it small enough to go whole.
    {"pin": "y" * 60_000, "n": 1e20},
    # Too large in UTF-8 bytes, not in characters.
    {"blob": "x" * 41_500 + "é" * 3900, "args": {"pin": "t"}},
    # Too large only in the characters JSON escapes.
    {"blob": 'quote " and \\ and \n' * 2500},
    # Only masking makes it too large: stored whole, as it always was (the observer judged the size unmasked).
    {"pairs": "passphrase=a " * 3700},
)


def stored_before(items: Iterable[Any], redactor: Redactor) -> list[str]:
    """The stored event texts as the boundary made them before: the observer cut an oversized CUSTOM event, and the
    redactor put the fragments together, masked the whole and cut it again (unless it had nothing to mask)."""
    observer = HarnessAguiStreamObserver(retain_events=False)
    timeline = TimelineRedactor(redactor)
    assembler = CustomEventAssembler()
    stored: list[dict[str, Any]] = []
    for item in items:
        for event in observer.observe(item):
            dumped = dump_event(event)
            if not redactor:
                stored.append(dumped)
            elif dumped.get("name") != FRAGMENT_EVENT_NAME:
                stored.append(timeline.event(dumped))
            elif (whole := assembler.feed(event)) is not None:
                masked = CustomEvent.model_validate(timeline.event(dump_event(whole)))
                stored += [dump_event(frame) for frame in fragment_custom_event(masked, dumped["value"]["id"])]
    return [encode_event(event) for event in stored]


def stored_now(items: Iterable[Any], redactor: Redactor) -> list[str]:
    """The stored event texts as `RunProjection` makes them: whole events from the observer, masked, then cut."""
    observer = HarnessAguiStreamObserver(retain_events=False, fragment=False)
    produced = [
        Produced(None, item.occurred_at, event, fragment_id(item, position))
        for item in items
        for position, event in enumerate(observer.observe(item))
    ]
    return [encode_event(dumped) for _, _, dumped in TimelineRedactor(redactor).events(produced)]


def with_big_events(items: Sequence[Any], before: Iterable[int], payloads: Iterable[dict[str, Any]]) -> list[Any]:
    """`items` with a large diagnostic event before each index in `before`, of the run of the item it precedes (a
    run still under way there), every run's sequences numbered again from 0."""
    extended = list(items)
    for index, payload in sorted(zip(before, payloads, strict=True), key=lambda pair: pair[0], reverse=True):
        source = extended[min(index, len(extended) - 1)]
        big = HarnessEvent(source.thread_id, source.run_id, 0, source.occurred_at, _diagnostic(payload))
        extended.insert(index, big)
    sequences: dict[str, int] = {}
    renumbered = []
    for item in extended:
        sequence = sequences.get(item.run_id, 0)
        sequences[item.run_id] = sequence + 1
        renumbered.append(dataclasses.replace(item, sequence=sequence))
    return renumbered


def _diagnostic(payload: dict[str, Any]) -> HarnessExtensionEvent:
    return HarnessExtensionEvent(kind="diagnostic", payload=payload)


@st.composite
def runs_with_big_events(draw: st.DrawFn) -> list[Any]:
    items = draw(generated_runs(children=2)).items
    # After the run's first item (its start), before any other.
    before = draw(st.lists(st.integers(1, max(1, len(items) - 1)), min_size=1, max_size=4))
    payloads = draw(st.lists(st.sampled_from(BIG_PAYLOADS), min_size=len(before), max_size=len(before)))
    return with_big_events(items, before, payloads)


@settings(
    max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(items=runs_with_big_events(), redactor=st.sampled_from([SECRETS, NOTHING]))
def test_generated_runs_with_large_custom_events_are_stored_as_before(items: list[Any], redactor: Redactor) -> None:
    assert stored_now(items, redactor) == stored_before(items, redactor)


def test_each_kind_of_large_event_is_stored_as_before_and_cut_only_when_still_too_large() -> None:
    run = factories.SourceRun("run-root", "thread_root")
    items = [run.started(), *(run.item(_diagnostic(payload)) for payload in BIG_PAYLOADS)]

    for redactor in (SECRETS, NOTHING):
        assert stored_now(items, redactor) == stored_before(items, redactor)
    masked = [json.loads(text) for text in stored_now(items, SECRETS)]
    fragments = [event for event in masked if event.get("name") == FRAGMENT_EVENT_NAME]
    ids = {fragment["value"]["id"] for fragment in fragments}
    assert ids == {fragment_id(items[1], 0), fragment_id(items[3], 0), fragment_id(items[4], 0)}
    assert "s3cret" not in json.dumps(masked) and "hunter2" not in json.dumps(masked)


def test_the_timeline_refuses_fragments_it_did_not_cut() -> None:
    big = CustomEvent(name="a13n.harness.diagnostic", value={"password": "s3cret", "rows": ["x" * 5000] * 12})
    fragments = fragment_custom_event(big, "frag-1")

    with pytest.raises(ValueError, match="whole"):
        TimelineRedactor(SECRETS).events([Produced(None, factories.now(), fragment) for fragment in fragments])


@pytest.mark.django_db
def test_the_projection_stores_a_runs_large_events_as_before() -> None:
    factories.configure_policy(redact_patterns=PATTERNS)
    execution = factories.make_execution()
    execution.policy_version = current_policy_version()
    execution.save(update_fields=["policy_version"])
    run = factories.make_run(execution)
    assert run.run_id is not None
    source = factories.SourceRun(run.run_id, execution.thread.thread_id)
    items = [source.started(), *(source.item(_diagnostic(payload)) for payload in BIG_PAYLOADS)]

    RunProjection(run).store([(None, item) for item in items])

    rows = TimelineEvent.objects.filter(run=run).order_by("position")
    assert [row.event for row in rows] == [json.loads(text) for text in stored_before(items, SECRETS)]


def test_a_projection_refuses_an_observer_that_cuts_events_itself() -> None:
    with pytest.raises(ValueError, match="fragment=False"):
        RunProjection(Run(), HarnessAguiStreamObserver())
