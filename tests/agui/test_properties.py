"""Property tests over generated runs: replay equivalence, atomic failure, well-formed AG-UI output."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from ag_ui.core import BaseEvent, TextMessageContentEvent, ToolCallArgsEvent
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from observers.agui import HarnessAguiObserver
from tests.support.agui_rules import assert_agui_stream
from tests.support.factories import history
from tests.support.generated_runs import Stream, generated_runs
from tests.support.observer_runs import OBSERVERS, PROPERTY_SETTINGS, live_outputs
from tests.support.property_examples import examples


class Armed:
    """A replay-stable processor that fails on one source item while armed (a processor bug the Host fixes)."""

    def __init__(self, target: Any = None) -> None:
        self.target = target

    def __call__(self, item: Any, event: BaseEvent) -> BaseEvent:
        if item is self.target:
            raise RuntimeError("processor failed")
        return event


def assert_fresh(observer: HarnessAguiObserver, observer_type: type[HarnessAguiObserver]) -> None:
    assert (observer.thread_id, observer.run_id, observer.event_count) == (None, None, 0)
    assert observer.snapshot() == ()
    assert observer._state == observer_type()._state


@pytest.mark.parametrize("kind", OBSERVERS)
# Each example replays every split point (quadratic in the run length), so fewer examples cover as much.
@settings(PROPERTY_SETTINGS, max_examples=max(examples(10), PROPERTY_SETTINGS.max_examples * 3 // 5))
@given(data=st.data())
def test_every_split_point_replays_to_the_live_projection(kind: str, data: st.DataObject) -> None:
    observer_type, depth = OBSERVERS[kind]
    stream: Stream = data.draw(generated_runs(children=depth))
    items = stream.items
    live = live_outputs(observer_type, items)
    everything = [event for output in live for event in output]
    assert_agui_stream(everything, complete=stream.terminal, calls_seen=True)

    async def check() -> None:
        for split in range(len(items) + 1):
            observer = observer_type()
            await observer.resume(history(items[:split]))
            assert list(observer.snapshot()) == [event for output in live[:split] for event in output]
            assert [observer.observe(item) for item in items[split:]] == live[split:]
            assert list(observer.snapshot()) == everything

    asyncio.run(check())


@pytest.mark.parametrize("kind", OBSERVERS)
@PROPERTY_SETTINGS
@given(data=st.data())
def test_failed_resume_leaves_a_fresh_observer(kind: str, data: st.DataObject) -> None:
    observer_type, depth = OBSERVERS[kind]
    stream: Stream = data.draw(generated_runs(children=depth))
    items = stream.items
    live = live_outputs(observer_type, items)
    failure = data.draw(st.sampled_from(["iterator", "processor", "cancel"]))
    at = data.draw(st.integers(0, len(items) - 1 if failure == "processor" else len(items)))
    if failure == "processor":
        # A processor only runs for items that produce events.
        assume(live[at])
    processor = Armed(items[at] if failure == "processor" else None)

    async def check() -> None:
        parked = asyncio.Event()

        async def broken_history() -> AsyncIterator[Any]:
            for item in items[:at]:
                yield item
            if failure == "iterator":
                raise ConnectionError("history broke")
            if failure == "cancel":
                parked.set()
                await asyncio.Event().wait()
            for item in items[at:]:
                yield item

        observer = observer_type(processor=processor)
        task = asyncio.create_task(observer.resume(broken_history()))
        if failure == "cancel":
            await parked.wait()
            assert_fresh(observer, observer_type)
            task.cancel()
        with pytest.raises((ConnectionError, RuntimeError, asyncio.CancelledError)):
            await task
        assert_fresh(observer, observer_type)
        # The Host fixes the cause and reopens a complete history: the retry is accepted and exact.
        processor.target = None
        await observer.resume(history(items))
        assert list(observer.snapshot()) == [event for output in live for event in output]

    asyncio.run(check())


@pytest.mark.parametrize("kind", OBSERVERS)
@PROPERTY_SETTINGS
@given(data=st.data())
def test_a_failing_item_is_not_accumulated(kind: str, data: st.DataObject) -> None:
    observer_type, depth = OBSERVERS[kind]
    stream: Stream = data.draw(generated_runs(children=depth))
    items = stream.items
    live = live_outputs(observer_type, items)
    at = data.draw(st.integers(0, len(items) - 1))
    assume(live[at])
    processor = Armed()
    observer = observer_type(processor=processor)
    outputs = [observer.observe(item) for item in items[:at]]
    before = (observer.thread_id, observer.run_id, observer._state, observer.snapshot())
    processor.target = items[at]
    with pytest.raises(RuntimeError):
        observer.observe(items[at])
    assert (observer.thread_id, observer.run_id, observer._state, observer.snapshot()) == before
    processor.target = None
    outputs.extend(observer.observe(item) for item in items[at:])
    assert outputs == live


@pytest.mark.parametrize("kind", OBSERVERS)
@PROPERTY_SETTINGS
@given(data=st.data())
def test_processor_output_is_replayed_identically(kind: str, data: st.DataObject) -> None:
    observer_type, depth = OBSERVERS[kind]
    stream: Stream = data.draw(generated_runs(children=depth))
    items = stream.items
    processor = _redacting
    live = live_outputs(observer_type, items, processor=processor)
    assert_agui_stream([event for output in live for event in output], complete=stream.terminal, calls_seen=True)
    split = data.draw(st.integers(0, len(items)))

    async def check() -> None:
        observer = observer_type(processor=processor)
        await observer.resume(history(items[:split]))
        assert [observer.observe(item) for item in items[split:]] == live[split:]

    asyncio.run(check())


def _redacting(item: Any, event: BaseEvent) -> BaseEvent | None:
    """A pure processor: drops diagnostics, shortens text and tool arguments."""
    name = getattr(event, "name", None)
    if name == "a13n.harness.diagnostic":
        return None
    if isinstance(event, TextMessageContentEvent | ToolCallArgsEvent):
        event.delta = event.delta[:2]
    return event
