"""The samples of the contract's "Replay and recovery" page (docs/contract.md), with this project's import paths.

`source_journal` and `host` are Host-managed interfaces the page only sketches; here they are the smallest
in-memory versions that behave as the page requires. The source items come from the real harness engine
running the offline demo agent.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from ag_ui.core import BaseEvent, TextMessageContentEvent

from observers.agui import AguiObservationError, HarnessAguiObserver
from runs.harness import HarnessState, HarnessStreamEvent
from runs.harness.demo import build_demo_agent
from tests.support.agui_rules import assert_agui_stream


def process_event(item: HarnessStreamEvent[Any], event: BaseEvent) -> BaseEvent | None:
    """A replay-stable processor: masks digits in streamed text, as a redaction policy might."""
    if isinstance(event, TextMessageContentEvent):
        event.delta = "".join("#" if char.isdigit() else char for char in event.delta)
    return event


class SourceJournal:
    """Host-kept source history: every item of every run, in order, addressed by (run_id, sequence)."""

    def __init__(self) -> None:
        self.items: list[HarnessStreamEvent[Any]] = []
        self.fail_after: int | None = None

    def append(self, item: HarnessStreamEvent[Any]) -> None:
        self.items.append(item)

    async def read_prefix(self, *, run_id: str, through: int) -> AsyncIterator[HarnessStreamEvent[Any]]:
        for count, item in enumerate(item for item in self.items if item.run_id == run_id and item.sequence <= through):
            if self.fail_after is not None and count == self.fail_after:
                raise ConnectionError("the journal connection dropped")
            yield item

    async def tail(self, *, run_id: str, after: int) -> AsyncIterator[HarnessStreamEvent[Any]]:
        for item in self.items:
            if item.run_id == run_id and item.sequence > after:
                yield item


class Host:
    def __init__(self) -> None:
        self.published: list[BaseEvent] = []

    async def persist_and_publish(self, events: tuple[BaseEvent, ...]) -> None:
        self.published.extend(events)


async def record(prompt: str, journal: SourceJournal, **options: Any) -> list[HarnessStreamEvent[Any]]:
    executable = build_demo_agent()
    async with executable.stream(prompt, **options) as stream:
        items = [item async for item in stream]
    for item in items:
        journal.append(item)
    return items


def uninterrupted(items: list[HarnessStreamEvent[Any]]) -> list[BaseEvent]:
    observer = HarnessAguiObserver(processor=process_event)
    return [event for item in items for event in observer.observe(item)]


@pytest.mark.parametrize("handoff", [0, 7, 25, 40])
async def test_resume_from_source_history_then_live_tail(handoff: int) -> None:
    journal = SourceJournal()
    items = await record("please look up record 42", journal)
    run_id = items[0].run_id
    host = Host()
    handoff_cursor = items[handoff].sequence

    observer = HarnessAguiObserver(processor=process_event)
    await observer.resume(
        journal.read_prefix(
            run_id=run_id,
            through=handoff_cursor,
        )
    )
    historical_projection = observer.snapshot()
    async for item in journal.tail(
        run_id=run_id,
        after=handoff_cursor,
    ):
        new_events = observer.observe(item)
        await host.persist_and_publish(new_events)

    expected = uninterrupted(items)
    assert list(historical_projection) + host.published == expected
    assert list(observer.snapshot()) == expected
    assert_agui_stream(expected, complete=True)
    # The processor ran for historical items too: the text had digits, and none survived.
    unprocessed = HarnessAguiObserver()
    assert expected != [event for item in items for event in unprocessed.observe(item)]
    assert not any(
        char.isdigit() for event in expected if isinstance(event, TextMessageContentEvent) for char in event.delta
    )


async def test_failure_and_retry_with_a_reopened_history() -> None:
    journal = SourceJournal()
    items = await record("look up the numbers 1 2 3", journal)
    run_id, last = items[0].run_id, items[-1].sequence
    journal.fail_after = 5
    primary_history = journal.read_prefix(run_id=run_id, through=last)

    observer = HarnessAguiObserver(processor=process_event)
    failures: list[Exception] = []
    try:
        await observer.resume(primary_history)
    except Exception as exc:
        failures.append(exc)
        # The failed attempt left the observer initial, so it accepts another complete history.
        assert (observer.thread_id, observer.run_id, observer.event_count) == (None, None, 0)
        journal.fail_after = None
        reopened_complete_history = journal.read_prefix(run_id=run_id, through=last)
        await observer.resume(reopened_complete_history)

    assert [type(exc) for exc in failures] == [ConnectionError]
    assert list(observer.snapshot()) == uninterrupted(items)
    with pytest.raises(AguiObservationError):
        await observer.resume(journal.read_prefix(run_id=run_id, through=last))


async def test_previous_and_current_observer_after_a_worker_takeover() -> None:
    journal = SourceJournal()
    checkpoint = HarnessState.new(thread_id="thread_takeover")
    previous_items = await record("please look up the record", journal, previous_state=checkpoint)
    # The worker died after journaling part of its run; the rest never happened as far as the Host knows.
    cut = len(previous_items) // 2
    del journal.items[cut:]
    previous_run_id = previous_items[0].run_id
    previous_run_history = journal.read_prefix(run_id=previous_run_id, through=previous_items[cut - 1].sequence)

    previous_observer = HarnessAguiObserver(processor=process_event)
    await previous_observer.resume(previous_run_history)

    # Worker recovery starts another Harness Run.
    host = Host()
    current_observer = HarnessAguiObserver(processor=process_event)
    async with build_demo_agent().stream("please look up the record", previous_state=checkpoint) as current_run_stream:
        current_items = []
        async for item in current_run_stream:
            current_items.append(item)
            new_events = current_observer.observe(item)
            await host.persist_and_publish(new_events)

    assert current_items[0].run_id != previous_run_id
    assert current_items[0].sequence == 0
    assert current_items[0].thread_id == previous_items[0].thread_id == "thread_takeover"
    # Both projections stay available side by side, each bound to its own run.
    assert previous_observer.run_id == previous_run_id
    assert current_observer.run_id == current_items[0].run_id
    assert list(previous_observer.snapshot()) == uninterrupted(previous_items[:cut])
    assert host.published == uninterrupted(current_items)
    assert_agui_stream(host.published, complete=True)
    # The earlier run must not be fed into the new observer (nor the other way round).
    with pytest.raises(AguiObservationError, match="run correlation"):
        current_observer.observe(previous_items[cut])
    with pytest.raises(AguiObservationError, match="run correlation"):
        previous_observer.observe(current_items[0])
