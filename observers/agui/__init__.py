"""The AG-UI projection of Harness Run streams (pure: no Django, Channels or RQ).

`HarnessAguiObserver` projects one run, `HarnessAguiStreamObserver` a root stream with its inline child
runs; both rebuild atomically from source history with `resume()`.
"""

from __future__ import annotations

from .continuation import ObserverContinuation
from .envelopes import AUTHORED_INPUT_EVENT_NAMES
from .errors import AguiObservationError
from .fragments import FRAGMENT_EVENT_NAME, CustomEventAssembler, fragment_custom_event
from .observer import HarnessAguiObserver
from .processor import MUTABLE_FIELDS, AguiEventProcessor
from .stream_observer import HarnessAguiStreamObserver
from .tool_results import tool_result_content

__all__ = (
    "AUTHORED_INPUT_EVENT_NAMES",
    "FRAGMENT_EVENT_NAME",
    "MUTABLE_FIELDS",
    "AguiEventProcessor",
    "AguiObservationError",
    "CustomEventAssembler",
    "HarnessAguiObserver",
    "HarnessAguiStreamObserver",
    "ObserverContinuation",
    "fragment_custom_event",
    "tool_result_content",
)
