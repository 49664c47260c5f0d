"""Oversized CUSTOM events travel as ordered fragments.

Transports and browsers limit frame sizes; a CUSTOM event carrying, say, a large tool payload is cut into
`a13n.stream.fragment` frames that `CustomEventAssembler` puts back together on the receiving side. A caller that
changes events before sending them (the Host masks them) asks the observer for whole events (`fragment=False`) and
cuts each one itself, after changing it, with the id `fragment_id` gives it: so an event is cut once, into the
fragments the observer would have sent.
"""

from __future__ import annotations

from typing import Any

from ag_ui.core import BaseEvent, CustomEvent, Event
from pydantic import TypeAdapter

from ._conversion import SourceItem

__all__ = (
    "FRAGMENT_CHARS",
    "FRAGMENT_EVENT_NAME",
    "MAX_CUSTOM_EVENT_BYTES",
    "CustomEventAssembler",
    "fragment_custom_event",
    "fragment_id",
    "oversized",
)

FRAGMENT_EVENT_NAME = "a13n.stream.fragment"
MAX_CUSTOM_EVENT_BYTES = 48 * 1024
FRAGMENT_CHARS = 4096

_EVENT: TypeAdapter[BaseEvent] = TypeAdapter(Event)


def fragment_id(item: SourceItem, position: int) -> str:
    """The id carried by the fragments of the event at `position` among those converted from `item`: unique in
    its thread, and the same whenever the item is converted again (by `resume()`, say)."""
    return f"{item.thread_id}:{item.run_id}:{item.sequence}:{position}"


def oversized(event: CustomEvent) -> bool:
    """Whether `fragment_custom_event` cuts `event`: its compact JSON is over `MAX_CUSTOM_EVENT_BYTES`."""
    return not _fits(event.model_dump_json(by_alias=True))


def fragment_custom_event(event: CustomEvent, fragment_id: str) -> list[CustomEvent]:
    """`[event]` when its compact JSON fits, else the fragment frames that carry that JSON text."""
    text = event.model_dump_json(by_alias=True)
    if _fits(text):
        return [event]
    count = -(-len(text) // FRAGMENT_CHARS)
    return [
        CustomEvent(
            name=FRAGMENT_EVENT_NAME,
            value={
                "id": fragment_id,
                "index": index,
                "count": count,
                "data": text[index * FRAGMENT_CHARS : (index + 1) * FRAGMENT_CHARS],
            },
            timestamp=event.timestamp,
            subagent_run_id=event.subagent_run_id,
        )
        for index in range(count)
    ]


def _fits(text: str) -> bool:
    # Cheap first: a text short in characters cannot be long in UTF-8 bytes beyond 4x.
    return len(text) * 4 <= MAX_CUSTOM_EVENT_BYTES or len(text.encode()) <= MAX_CUSTOM_EVENT_BYTES


class CustomEventAssembler:
    """Client-side reassembly: feed every received event, get back whole events (or `None` mid-fragment)."""

    def __init__(self) -> None:
        self._pending: dict[str, list[str | None]] = {}

    def feed(self, event: BaseEvent) -> BaseEvent | None:
        if not isinstance(event, CustomEvent) or event.name != FRAGMENT_EVENT_NAME:
            return event
        fragment_id, index, count, data = _fragment_fields(event.value)
        chunks = self._pending.get(fragment_id)
        if chunks is not None and len(chunks) != count:
            raise ValueError(f"fragment {fragment_id!r} changed its count from {len(chunks)} to {count}")
        # Everything is checked before anything is stored, so a bad frame leaves the pending fragments alone.
        chunks = self._pending.setdefault(fragment_id, [None] * count)
        chunks[index] = data
        if any(chunk is None for chunk in chunks):
            return None
        del self._pending[fragment_id]
        return _EVENT.validate_json("".join(chunk for chunk in chunks if chunk is not None))


def _fragment_fields(value: Any) -> tuple[str, int, int, str]:
    """`(id, index, count, data)` of a fragment frame's value; `ValueError` when it is not one."""
    if isinstance(value, dict):
        fragment_id, index, count, data = (value.get(key) for key in ("id", "index", "count", "data"))
        if (
            isinstance(fragment_id, str)
            and isinstance(data, str)
            and type(index) is int
            and type(count) is int
            and 0 <= index < count
        ):
            return fragment_id, index, count, data
    raise ValueError(f"not a {FRAGMENT_EVENT_NAME} value: expected id, 0 <= index < count and data")
