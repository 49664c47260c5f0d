"""CUSTOM events for source items that have no standard AG-UI event.

Every CUSTOM value is an envelope naming the source item (thread, run, sequence, time) around a JSON form of
the source event, so a client can correlate it without knowing the harness types.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

import pydantic_core
from ag_ui.core import CustomEvent
from pydantic import TypeAdapter

from runs.harness import HarnessExtensionEvent

__all__ = (
    "AUTHORED_INPUT_EVENT_NAMES",
    "HARNESS_PREFIX",
    "INPUT_PREFIX",
    "PYDANTIC_AI_PREFIX",
    "envelope",
    "extension_json",
    "native_json",
    "timestamp_ms",
)

HARNESS_PREFIX = "a13n.harness."
# Input that entered a run, one name per source: `a13n.input.user`, `a13n.input.steering`, ...
INPUT_PREFIX = "a13n.input."
# Inputs a person wrote, as opposed to material a harness or tool supplied.
AUTHORED_INPUT_EVENT_NAMES = frozenset({"a13n.input.user", "a13n.input.steering"})
PYDANTIC_AI_PREFIX = "a13n.pydantic_ai."

_ADAPTERS: dict[type[Any], TypeAdapter[Any]] = {}


def timestamp_ms(occurred_at: datetime) -> int:
    """AG-UI timestamps are integer milliseconds since the epoch."""
    return int(occurred_at.timestamp() * 1000)


def native_json(event: object) -> Any:
    """The JSON-mode serialisation of a native pydantic-ai (or capability) event.

    Serializer warnings are errors: a value pydantic cannot represent must fail the item, not silently
    become something a replay would render differently.
    """
    if dataclasses.is_dataclass(event) and not isinstance(event, type):
        adapter = _ADAPTERS.get(type(event))
        if adapter is None:
            adapter = _ADAPTERS[type(event)] = TypeAdapter(type(event))
        return adapter.dump_python(event, mode="json", warnings="error")
    return pydantic_core.to_jsonable_python(event)


def extension_json(event: HarnessExtensionEvent) -> Any:
    return event.model_dump(mode="json", by_alias=True)


def envelope(
    name: str,
    *,
    thread_id: str,
    run_id: str,
    sequence: int,
    occurred_at: datetime,
    event: Any,
    subagent_run_id: str | None = None,
) -> CustomEvent:
    value = {
        "thread_id": thread_id,
        "run_id": run_id,
        "sequence": sequence,
        "occurred_at": occurred_at.isoformat(),
        "event": event,
    }
    return CustomEvent(name=name, value=value, timestamp=timestamp_ms(occurred_at), subagent_run_id=subagent_run_id)
