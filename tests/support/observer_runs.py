"""What the observer tests share: the two observer kinds with the child depth each is tested to, the Hypothesis
settings of the property tests, an observer's live output for a list of items, and a run cut mid-text.

The "agui" profile (the default) keeps the whole suite inside CI's time budget; `AGUI_HYPOTHESIS_PROFILE=thorough`
searches many more generated runs after a change to the conversion or the generators. Neither profile is loaded
globally, so other tests keep Hypothesis' own defaults.
"""

from __future__ import annotations

import os
from typing import Any

from ag_ui.core import BaseEvent
from hypothesis import HealthCheck, settings
from pydantic_ai import PartDeltaEvent, PartEndEvent, PartStartEvent, TextPart, TextPartDelta, ThinkingPart

from observers.agui import HarnessAguiObserver, HarnessAguiStreamObserver
from tests.support.factories import SourceRun
from tests.support.property_examples import examples

# Generated runs are large by design (whole streams with children); slow generation is expected, not a bug.
_LARGE_RUNS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

settings.register_profile("agui", _LARGE_RUNS, max_examples=25)
settings.register_profile("thorough", _LARGE_RUNS, max_examples=400)

OBSERVERS: dict[str, tuple[type[HarnessAguiObserver], int]] = {
    "single": (HarnessAguiObserver, 0),
    "stream": (HarnessAguiStreamObserver, 2),
}

_PROFILE = settings.get_profile(os.environ.get("AGUI_HYPOTHESIS_PROFILE", "agui"))
PROPERTY_SETTINGS = settings(_PROFILE, max_examples=examples(_PROFILE.max_examples))


def live_outputs(
    observer_type: type[HarnessAguiObserver], items: list[Any], **options: Any
) -> list[tuple[BaseEvent, ...]]:
    observer = observer_type(**options)
    return [observer.observe(item) for item in items]


def text_run() -> tuple[list[Any], list[Any]]:
    """A run cut mid-text: the history prefix and the live tail."""
    run = SourceRun()
    prefix = [
        run.started(),
        run.request(0),
        run.item(PartStartEvent(index=0, part=ThinkingPart("plan", signature="sig"))),
        run.item(PartEndEvent(index=0, part=ThinkingPart("plan", signature="sig"))),
        run.item(PartStartEvent(index=1, part=TextPart("Hel"))),
        run.item(PartDeltaEvent(index=1, delta=TextPartDelta("lo"))),
    ]
    tail = [
        run.item(PartDeltaEvent(index=1, delta=TextPartDelta(", world"))),
        run.item(PartEndEvent(index=1, part=TextPart("Hello, world"))),
        run.completed("Hello, world", input_tokens=3, output_tokens=4),
    ]
    return prefix, tail
