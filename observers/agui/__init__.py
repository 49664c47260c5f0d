"""The AG-UI projection of Harness Run streams (pure: no Django, Channels or RQ).

`HarnessAguiObserver` projects one run, `HarnessAguiStreamObserver` a root stream with its inline child
runs; both rebuild atomically from source history with `resume()`. Oversized CUSTOM events come out as
fragments, or whole with `fragment=False` for a caller that cuts them itself (`fragment_custom_event`).
"""

from __future__ import annotations

from ._continuation import ObserverContinuation
from ._envelopes import AUTHORED_INPUT_EVENT_NAMES, HARNESS_PREFIX, INPUT_PREFIX, PYDANTIC_AI_PREFIX
from ._errors import AguiObservationError
from ._fragments import FRAGMENT_EVENT_NAME, CustomEventAssembler, fragment_custom_event, fragment_id, oversized
from ._observer import HarnessAguiObserver
from ._processor import MUTABLE_FIELDS, AguiEventProcessor
from ._stream_observer import HarnessAguiStreamObserver
from ._tool_results import tool_result_content

__all__ = (
    "AUTHORED_INPUT_EVENT_NAMES",
    "FRAGMENT_EVENT_NAME",
    "HARNESS_PREFIX",
    "INPUT_PREFIX",
    "MUTABLE_FIELDS",
    "PYDANTIC_AI_PREFIX",
    "AguiEventProcessor",
    "AguiObservationError",
    "CustomEventAssembler",
    "HarnessAguiObserver",
    "HarnessAguiStreamObserver",
    "ObserverContinuation",
    "fragment_custom_event",
    "fragment_id",
    "oversized",
    "tool_result_content",
)
