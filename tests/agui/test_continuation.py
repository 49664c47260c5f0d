"""Observer export / restore (spec 4.10): a restored observer continues exactly as the uninterrupted one."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from observers.agui import AguiObservationError, HarnessAguiObserver, HarnessAguiStreamObserver, ObserverContinuation
from tests.support.factories import history
from tests.support.generated_runs import Stream, generated_runs
from tests.support.observer_runs import OBSERVERS, PROPERTY_SETTINGS, live_outputs, text_run


@pytest.mark.parametrize("kind", OBSERVERS)
@settings(PROPERTY_SETTINGS)
@given(data=st.data())
def test_a_restored_observer_continues_like_the_uninterrupted_one(kind: str, data: st.DataObject) -> None:
    observer_type, depth = OBSERVERS[kind]
    stream: Stream = data.draw(generated_runs(children=depth))
    items = stream.items
    split = data.draw(st.integers(1, len(items)))
    uninterrupted = live_outputs(observer_type, items)

    first = observer_type()
    for item in items[:split]:
        first.observe(item)
    # Through JSON, as a Host would store it.
    restored = observer_type.restore(first.export().model_dump_json())

    assert [restored.observe(item) for item in items[split:]] == uninterrupted[split:]
    assert (restored.thread_id, restored.run_id) == (first.thread_id, first.run_id)


def test_a_restored_observer_keeps_no_events_and_refuses_resume() -> None:
    prefix, tail = text_run()
    observer = HarnessAguiObserver()
    for item in prefix:
        observer.observe(item)
    restored = HarnessAguiObserver.restore(observer.export())

    with pytest.raises(AguiObservationError, match="does not retain events"):
        restored.snapshot()
    with pytest.raises(AguiObservationError, match="fresh observer"):
        asyncio.run(restored.resume(history(prefix)))
    assert [event.type.value for event in restored.observe(tail[0])] == ["TEXT_MESSAGE_CONTENT"]


def test_nothing_to_export_before_the_first_item() -> None:
    with pytest.raises(AguiObservationError, match="observed its run"):
        HarnessAguiObserver().export()


def bad_continuations(good: ObserverContinuation) -> list[str | dict[str, Any]]:
    dumped = good.model_dump(mode="json")
    run_id = good.run_id
    state = dumped["state"]
    return [
        "not json",
        {**dumped, "schema_version": "2"},
        {**dumped, "observer": "stream"},
        {**dumped, "unexpected": True},
        {**dumped, "state": {**state, "runs": {}}},
        {**dumped, "state": {**state, "runs": {run_id: {**state["runs"][run_id], "request_index": -1}}}},
        {
            **dumped,
            "state": {
                **state,
                "runs": {
                    run_id: {**state["runs"][run_id], "cursors": {"1": {"kind": "audio", "id": "x", "minted": 1}}}
                },
            },
        },
    ]


def test_a_bad_continuation_is_refused_and_builds_nothing() -> None:
    prefix, _ = text_run()
    observer = HarnessAguiObserver()
    for item in prefix:
        observer.observe(item)
    good = observer.export()

    for bad in bad_continuations(good):
        with pytest.raises(AguiObservationError):
            HarnessAguiObserver.restore(bad)
    with pytest.raises(AguiObservationError, match="run observer's continuation cannot restore a stream"):
        HarnessAguiStreamObserver.restore(good)
    # The good one still restores: refusing the others changed nothing.
    assert HarnessAguiObserver.restore(good).run_id == good.run_id


@pytest.mark.parametrize("observer_type", [HarnessAguiObserver, HarnessAguiStreamObserver])
def test_a_continuation_with_fields_of_the_wrong_type_is_refused(observer_type: type[HarnessAguiObserver]) -> None:
    prefix, tail = text_run()
    observer = observer_type()
    for item in prefix:
        observer.observe(item)
    good = observer.export()
    wrong: list[ObserverContinuation | dict[str, Any]] = [
        {**good.model_dump(mode="json"), "thread_id": 42},
        # An instance is checked too: a copy with changed fields, or one built without validation, is not.
        good.model_copy(update={"thread_id": 42}),
        good.model_copy(update={"run_id": ["run-1"]}),
        good.model_copy(update={"state": good.state.model_copy(update={"used_ids": "run-1"})}),
        good.model_copy(update={"state": {"runs": 1}}),
        ObserverContinuation.model_construct(**{**dict(good), "thread_id": 42}),
    ]

    for bad in wrong:
        with pytest.raises(AguiObservationError, match="not an observer continuation"):
            observer_type.restore(bad)
    # The observer that exported and the good continuation are untouched: both continue as before.
    restored = observer_type.restore(good)
    assert [restored.observe(item) for item in tail] == [observer.observe(item) for item in tail]
