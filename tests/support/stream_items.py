"""Harness stream items as a run's writer receives them."""

from __future__ import annotations

from typing import Any

from pydantic_ai.messages import PartDeltaEvent, TextPartDelta

from runs.harness import HarnessEvent
from runs.models import Run

from . import factories


def text_deltas(run: Run, count: int) -> list[Any]:
    """A text message's start items and then `count` deltas, numbered from 2 on."""
    thread_id, run_id = run.execution.thread.thread_id, run.run_id
    assert run_id is not None, "the run is bound to an engine run id (factories.leased_run)"
    start = factories.text_items(thread_id, run_id)[:2]
    return [
        *start,
        *(
            HarnessEvent(
                thread_id,
                run_id,
                sequence,
                factories.now(),
                PartDeltaEvent(index=0, delta=TextPartDelta(content_delta=f"{sequence} ")),
            )
            for sequence in range(2, 2 + count)
        ),
    ]
