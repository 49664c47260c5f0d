"""The worker's event loop: asyncio's selector loop, polling for I/O at most once per GIL switch interval while
callbacks are ready to run.

asyncio polls its selector on every turn of the loop, even when callbacks are waiting and the poll must not block,
and every poll releases the GIL. A run streaming from its model turns the loop several times per delta, so a busy
loop lets go of the GIL and takes it straight back tens of thousands of times a second. Meanwhile the worker's
database thread, back from a driver call, waits for the GIL: each release wakes it, and by the time it runs the loop
holds the GIL again. CPython hands the GIL over only when the waiter has waited a whole switch interval without
being woken (bpo-7946, the convoy effect), so the database thread got it only when the stream stalled, and every
futile wake-up was a context switch: about 60,000 switches and a second of kernel time per 20,000 deltas on the
hosting benchmark (bench/findings.md).

Polled at most once per switch interval while busy, the loop leaves the waiter to be handed the GIL when its wait
times out. I/O is then seen at most one interval (5 ms by default) later under load; an idle loop blocks in its
selector exactly as before.
"""

from __future__ import annotations

import asyncio
import selectors
import sys
import time

__all__ = ("PatientSelector", "new_event_loop")


class PatientSelector(selectors.DefaultSelector):
    """A selector whose non-blocking polls are skipped within `interval` seconds of the last real poll."""

    def __init__(self, interval: float | None = None) -> None:
        super().__init__()
        self.interval = sys.getswitchinterval() if interval is None else interval
        self._polled_at = 0.0

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        now = time.monotonic()
        if timeout is not None and timeout <= 0 and now - self._polled_at < self.interval:
            # Callbacks are ready and I/O was looked at a moment ago: run them without releasing the GIL.
            return []
        self._polled_at = now
        return super().select(timeout)


def new_event_loop() -> asyncio.AbstractEventLoop:
    """An event loop for the runs of one worker process (`asyncio.Runner(loop_factory=new_event_loop)`)."""
    return asyncio.SelectorEventLoop(PatientSelector())
