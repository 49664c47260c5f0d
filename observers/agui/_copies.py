"""Detached copies of AG-UI events.

The observer hands events to callers and processors while keeping its own; a copy must share nothing mutable.
`copy.deepcopy` does that but dominated the cost of `observe()`, so JSON-shaped payloads are copied directly.
"""

from __future__ import annotations

import copy
from typing import Any

from ag_ui.core import BaseEvent

__all__ = ("detached",)

_IMMUTABLE = (str, int, float, bool, type(None))


def detached(event: BaseEvent) -> BaseEvent:
    """A copy of `event` sharing no mutable value with it."""
    clone = event.model_copy()
    fields = clone.__dict__
    for name, value in fields.items():
        if not isinstance(value, _IMMUTABLE):
            fields[name] = _copied(value)
    return clone


def _copied(value: Any) -> Any:
    # Event payloads are JSON-shaped (CUSTOM values, raw events), so plain containers cover almost everything.
    if type(value) is dict:
        return {key: _copied(item) for key, item in value.items()}
    if type(value) is list:
        return [_copied(item) for item in value]
    if isinstance(value, _IMMUTABLE):
        return value
    return copy.deepcopy(value)
