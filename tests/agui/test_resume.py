"""Observer resume and atomicity (contract part A, S6–S27; scenarios T113–T127; see docs/contract.md)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from ag_ui.core import BaseEvent, CustomEvent, RunStartedEvent, TextMessageContentEvent

from observers.agui import AguiObservationError, HarnessAguiObserver
from runs.harness import HarnessEvent, HarnessExtensionEvent
from tests.support.agui_rules import event_as
from tests.support.factories import SourceRun, history
from tests.support.observer_runs import text_run


def assert_fresh(observer: HarnessAguiObserver) -> None:
    assert (observer.thread_id, observer.run_id, observer.event_count) == (None, None, 0)
    assert observer.snapshot() == ()


class Gate:
    """A history that yields some items, then waits until the test lets it go on (or fails it)."""

    def __init__(self, items: list[Any], *, pause_after: int, error: BaseException | None = None) -> None:
        self.items = items
        self.pause_after = pause_after
        self.error = error
        self.paused = asyncio.Event()
        self.proceed = asyncio.Event()

    async def __aiter__(self) -> AsyncIterator[Any]:
        for position, item in enumerate(self.items):
            if position == self.pause_after:
                self.paused.set()
                await self.proceed.wait()
                if self.error is not None:
                    raise self.error
            yield item


async def test_resume_then_live_tail_equals_uninterrupted_observation() -> None:
    prefix, tail = text_run()
    live = HarnessAguiObserver()
    for item in prefix:
        live.observe(item)
    historical = live.snapshot()
    live_outputs = [live.observe(item) for item in tail]

    observer = HarnessAguiObserver()
    await observer.resume(history(prefix))
    assert observer.snapshot() == historical
    assert (observer.thread_id, observer.run_id) == ("thread_1", "run-1")
    outputs = [observer.observe(item) for item in tail]
    assert outputs == live_outputs
    assert [event.type.value for event in outputs[0]] == ["TEXT_MESSAGE_CONTENT"]
    assert event_as(TextMessageContentEvent, outputs[0][0]).message_id == "run-1:request-0:part-1:text"
    assert [event.type.value for event in outputs[1]] == ["TEXT_MESSAGE_END"]
    assert observer.snapshot() == live.snapshot()


async def test_failing_history_leaves_the_observer_fresh_and_a_retry_works() -> None:
    prefix, _ = text_run()

    async def broken() -> AsyncIterator[Any]:
        for item in prefix[:3]:
            yield item
        raise ConnectionError("journal went away")

    observer = HarnessAguiObserver()
    with pytest.raises(ConnectionError):
        await observer.resume(broken())
    assert_fresh(observer)
    await observer.resume(history(prefix))
    assert observer.event_count > 0 and observer.run_id == "run-1"


async def test_correlation_change_in_history() -> None:
    prefix, _ = text_run()
    other = SourceRun(run_id="run-2").started()
    observer = HarnessAguiObserver()
    with pytest.raises(AguiObservationError, match="run correlation") as caught:
        await observer.resume(history([*prefix[:2], other, *prefix[2:]]))
    assert_fresh(observer)
    # S22: a semantic conversion error is a ValueError, so a Host can treat it like any bad value.
    assert isinstance(caught.value, ValueError)


async def test_agui_records_are_not_source_history() -> None:
    prefix, _ = text_run()
    recorded = {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "x"}
    observer = HarnessAguiObserver()
    with pytest.raises(TypeError):
        await observer.resume(history([*prefix[:2], recorded]))
    with pytest.raises(TypeError):
        await observer.resume(history([TextMessageContentEvent(message_id="m", delta="x")]))
    assert_fresh(observer)


async def test_cancelled_resume_leaves_the_observer_fresh() -> None:
    prefix, _ = text_run()
    gate = Gate(prefix, pause_after=4)
    observer = HarnessAguiObserver()
    task = asyncio.create_task(observer.resume(gate))
    await gate.paused.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert_fresh(observer)
    (started,) = observer.observe(prefix[0])
    assert started.type.value == "RUN_STARTED" and observer.run_id == "run-1"


async def test_live_observation_and_second_resume_are_refused_while_resuming() -> None:
    prefix, tail = text_run()
    gate = Gate(prefix, pause_after=3)
    observer = HarnessAguiObserver()
    task = asyncio.create_task(observer.resume(gate))
    await gate.paused.wait()

    with pytest.raises(AguiObservationError, match="resume"):
        observer.observe(tail[0])
    with pytest.raises(AguiObservationError, match="in progress"):
        await observer.resume(history(prefix))
    with pytest.raises(AguiObservationError, match="resume"):
        observer.export()
    # Reads show the pre-resume state while the rebuild waits for its next item.
    assert_fresh(observer)

    gate.proceed.set()
    await task
    reference = HarnessAguiObserver()
    for item in prefix:
        reference.observe(item)
    assert observer.snapshot() == reference.snapshot()


async def test_resume_needs_a_fresh_observer() -> None:
    prefix, _ = text_run()
    observed = HarnessAguiObserver()
    observed.observe(prefix[0])
    with pytest.raises(AguiObservationError, match="fresh"):
        await observed.resume(history(prefix))

    resumed = HarnessAguiObserver()
    await resumed.resume(history(prefix))
    with pytest.raises(AguiObservationError, match="fresh"):
        await resumed.resume(history(prefix))


async def test_a_failed_first_observe_does_not_block_resume() -> None:
    prefix, _ = text_run()

    class FailsOnce:
        failed = False

        def __call__(self, item: Any, event: BaseEvent) -> BaseEvent:
            if isinstance(item, HarnessEvent) and item.sequence == 0 and not self.failed:
                self.failed = True
                raise RuntimeError("transient")
            return event

    observer = HarnessAguiObserver(processor=FailsOnce())
    with pytest.raises(RuntimeError):
        observer.observe(prefix[0])
    assert_fresh(observer)
    await observer.resume(history(prefix))
    assert observer.run_id == "run-1"


async def test_empty_history() -> None:
    prefix, _ = text_run()
    observer = HarnessAguiObserver()
    await observer.resume(history([]))
    assert_fresh(observer)
    with pytest.raises(AguiObservationError):
        await observer.resume(history(prefix))
    observer.observe(prefix[0])
    assert observer.run_id == "run-1"


async def test_wrong_python_types() -> None:
    observer = HarnessAguiObserver()
    with pytest.raises(TypeError):
        await observer.resume([])  # type: ignore[arg-type]  # the wrong type is the point
    with pytest.raises(TypeError):
        observer.observe("x")  # type: ignore[arg-type]  # the wrong type is the point
    assert_fresh(observer)


async def test_without_retained_events_conversion_still_continues() -> None:
    prefix, tail = text_run()
    observer = HarnessAguiObserver(retain_events=False)
    await observer.resume(history(prefix))
    with pytest.raises(AguiObservationError, match="retain"):
        observer.snapshot()
    assert observer.event_count == 0

    reference = HarnessAguiObserver()
    for item in prefix:
        reference.observe(item)
    assert [observer.observe(item) for item in tail] == [reference.observe(item) for item in tail]


async def test_an_observer_giving_whole_events_resumes_as_one_and_cuts_nothing() -> None:
    run = SourceRun()
    big = HarnessExtensionEvent(kind="diagnostic", payload={"blob": "x" * 55_000})
    prefix = [run.started(), run.item(big)]
    tail = [run.item(big)]
    live = HarnessAguiObserver(fragment=False)
    for item in prefix:
        live.observe(item)
    live_outputs = [live.observe(item) for item in tail]

    observer = HarnessAguiObserver(fragment=False)
    await observer.resume(history(prefix))

    assert observer.snapshot() == live.snapshot()[: observer.event_count]
    assert [observer.observe(item) for item in tail] == live_outputs
    wholes = [event for event in observer.snapshot() if isinstance(event, CustomEvent)]
    assert [event.name for event in wholes] == ["a13n.harness.diagnostic"] * 2


async def test_processors_must_be_replay_stable() -> None:
    prefix, tail = text_run()

    class Counting:
        def __init__(self) -> None:
            self.count = 0

        def __call__(self, item: Any, event: BaseEvent) -> BaseEvent:
            if isinstance(event, TextMessageContentEvent):
                self.count += 1
                event.delta = f"{event.delta}#{self.count}"
            return event

    counting = Counting()
    live = HarnessAguiObserver(processor=counting)
    for item in prefix:
        live.observe(item)
    first_live = live.observe(tail[0])
    # The Host restarts and rebuilds with the same processor object, whose counter went on counting.
    rebuilt = HarnessAguiObserver(processor=counting)
    await rebuilt.resume(history(prefix))
    assert rebuilt.observe(tail[0]) != first_live

    def pure(item: Any, event: BaseEvent) -> BaseEvent:
        if isinstance(event, TextMessageContentEvent):
            event.delta = event.delta.upper()
        return event

    one, two = HarnessAguiObserver(processor=pure), HarnessAguiObserver(processor=pure)
    await one.resume(history(prefix))
    await two.resume(history(prefix))
    assert one.snapshot() == two.snapshot()


async def test_a_new_run_needs_a_new_observer() -> None:
    prefix, _ = text_run()
    observer = HarnessAguiObserver()
    await observer.resume(history(prefix))
    next_run = SourceRun(run_id="run-2")
    with pytest.raises(AguiObservationError, match="new observer"):
        observer.observe(next_run.started())
    current = HarnessAguiObserver()
    (started,) = current.observe(next_run.started())
    assert event_as(RunStartedEvent, started).run_id == "run-2"


async def test_resume_fragments_like_observe() -> None:
    run = SourceRun()
    items = [run.started(), run.item(HarnessExtensionEvent(kind="diagnostic", payload={"blob": "x" * 60_000}))]
    live = HarnessAguiObserver()
    for item in items:
        live.observe(item)
    resumed = HarnessAguiObserver()
    await resumed.resume(history(items))
    assert resumed.snapshot() == live.snapshot()
    assert all(isinstance(event, CustomEvent) for event in resumed.snapshot()[1:])


async def test_an_abandoned_history_generator_is_closed() -> None:
    prefix, _ = text_run()
    closed: list[bool] = []

    async def journal_cursor() -> AsyncIterator[Any]:
        try:
            for item in prefix:
                yield item
        finally:
            closed.append(True)

    def broken(item: Any, event: BaseEvent) -> BaseEvent:
        if isinstance(item, HarnessEvent) and item.sequence == 3:
            raise RuntimeError("processor failed")
        return event

    observer = HarnessAguiObserver(processor=broken)
    with pytest.raises(RuntimeError):
        await observer.resume(journal_cursor())
    assert closed == [True]
    assert_fresh(observer)
