"""The worker's event loop: while callbacks are ready it polls for I/O at most once per interval, so it does not
hand the GIL back and forth on every turn; idle, it waits in its selector; I/O is delivered either way."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

from runs.services.worker import event_loop


class CountingSelector(event_loop.PatientSelector):
    """Counts the polls that reached the system (the others returned at once, without releasing the GIL)."""

    def __init__(self, interval: float) -> None:
        super().__init__(interval)
        self.polls = 0
        self.turns = 0

    def select(self, timeout: float | None = None) -> Any:
        self.turns += 1
        polled_at = self._polled_at
        events = super().select(timeout)
        self.polls += self._polled_at != polled_at
        return events


def _run(selector: CountingSelector, main: Any) -> Any:
    with asyncio.Runner(loop_factory=lambda: asyncio.SelectorEventLoop(selector)) as runner:
        return runner.run(main())


async def _busy(turns: int) -> None:
    for _ in range(turns):
        await asyncio.sleep(0)


def test_a_busy_loop_polls_once_per_interval_not_once_per_turn():
    selector = CountingSelector(interval=3600)
    _run(selector, lambda: _busy(1000))
    assert selector.turns >= 1000
    # The first turn polls; every later turn had callbacks ready within the interval. The runner's own shutdown
    # (cancelling what is left, closing async generators) adds a few turns, and no poll.
    assert selector.polls <= 2


def test_without_an_interval_every_turn_polls_as_asyncio_does():
    selector = CountingSelector(interval=0)
    _run(selector, lambda: _busy(1000))
    assert selector.polls == selector.turns


def test_the_default_interval_is_the_gil_switch_interval():
    import sys

    assert event_loop.PatientSelector().interval == sys.getswitchinterval()
    loop = event_loop.new_event_loop()
    try:
        assert isinstance(loop._selector, event_loop.PatientSelector)
    finally:
        loop.close()


def test_io_reaches_a_busy_loop_and_an_idle_one():
    async def main() -> list[str]:
        loop = asyncio.get_running_loop()
        left, right = socket.socketpair()
        received: list[str] = []
        arrived = asyncio.Event()

        def readable() -> None:
            received.append(left.recv(16).decode())
            arrived.set()

        loop.add_reader(left, readable)
        try:
            # Busy: the data is seen once a poll is due, while the loop keeps turning.
            right.send(b"busy")
            while not arrived.is_set():  # noqa: ASYNC110 - spinning is the point: the loop must stay busy
                await asyncio.sleep(0)
            arrived.clear()
            # Idle: the loop waits in its selector until the data comes.
            loop.call_later(0.05, right.send, b"idle")
            await asyncio.wait_for(arrived.wait(), timeout=30)
        finally:
            loop.remove_reader(left)
            left.close()
            right.close()
        return received

    assert _run(CountingSelector(interval=0.01), main) == ["busy", "idle"]
