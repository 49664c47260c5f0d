"""The processor hook: a Host may drop an AG-UI event or rewrite its content, nothing else (spec 4.7)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

import pydantic_core
from ag_ui.core import BaseEvent, Event, EventType
from pydantic import TypeAdapter, ValidationError

from .conversion import SourceItem
from .errors import AguiObservationError

__all__ = ("MUTABLE_FIELDS", "AguiEventProcessor", "apply_processor")

AguiEventProcessor: TypeAlias = Callable[[SourceItem, BaseEvent], BaseEvent | None]
"""Called once per converted event with the source item and a private copy of the event; `None` drops it.

It runs again for every historical item during `resume()`, so it must be deterministic and side-effect
free, or a rebuilt projection will differ from the live one.
"""

MUTABLE_FIELDS: dict[EventType, frozenset[str]] = {
    EventType.TEXT_MESSAGE_CONTENT: frozenset({"delta"}),
    EventType.REASONING_MESSAGE_CONTENT: frozenset({"delta"}),
    EventType.REASONING_ENCRYPTED_VALUE: frozenset({"encrypted_value"}),
    EventType.TOOL_CALL_ARGS: frozenset({"delta"}),
    EventType.TOOL_CALL_RESULT: frozenset({"content"}),
    EventType.RUN_FINISHED: frozenset({"result"}),
    EventType.RUN_ERROR: frozenset({"message"}),
}
"""Content a processor may redact. Ids, names, roles, timestamps, attribution, outcomes, usage and every
CUSTOM value are structure: clients correlate on them, so changing one would corrupt the projection."""

_EVENT: TypeAdapter[Any] = TypeAdapter(Event)


def apply_processor(processor: AguiEventProcessor, item: SourceItem, events: Sequence[BaseEvent]) -> list[BaseEvent]:
    """Run `processor` over the events converted from `item`; exceptions it raises propagate unchanged."""
    processed: list[BaseEvent] = []
    for event in events:
        result = processor(item, event.model_copy(deep=True))
        if result is not None:
            processed.append(_checked(event, result))
    return processed


def _checked(original: BaseEvent, result: object) -> BaseEvent:
    if not isinstance(result, BaseEvent):
        raise AguiObservationError(f"the processor returned {type(result).__name__}, not an AG-UI event")
    try:
        # A JSON round trip both validates strictly and detaches the result from anything the processor keeps.
        checked: BaseEvent = _EVENT.validate_json(result.model_dump_json(by_alias=True, warnings="error"), strict=True)
    except (ValidationError, pydantic_core.PydanticSerializationError) as exc:
        raise AguiObservationError(f"the processor returned an invalid {original.type.value} event: {exc}") from exc
    if checked.type != original.type:
        raise AguiObservationError(
            f"the processor changed the event type from {original.type.value} to {checked.type.value}"
        )
    mutable = MUTABLE_FIELDS.get(original.type, frozenset())
    before = original.model_dump(mode="json")
    after = checked.model_dump(mode="json")
    changed = sorted(
        name for name in before.keys() | after.keys() if name not in mutable and before.get(name) != after.get(name)
    )
    if changed:
        raise AguiObservationError(
            f"the processor changed structural fields of a {original.type.value} event: {', '.join(changed)}"
        )
    return checked
