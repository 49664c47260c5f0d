"""The processor hook: a Host may drop an AG-UI event or rewrite its content, nothing else."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeAlias

import pydantic_core
from ag_ui.core import BaseEvent, EventType
from pydantic import ValidationError

from ._conversion import SourceItem
from ._copies import detached
from ._errors import AguiObservationError

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


def apply_processor(processor: AguiEventProcessor, item: SourceItem, events: Sequence[BaseEvent]) -> list[BaseEvent]:
    """Run `processor` over the events converted from `item`; exceptions it raises propagate unchanged."""
    processed: list[BaseEvent] = []
    for event in events:
        result = processor(item, detached(event))
        if result is not None:
            processed.append(_checked(event, result))
    return processed


def _checked(original: BaseEvent, result: object) -> BaseEvent:
    if not isinstance(result, BaseEvent):
        raise AguiObservationError(f"the processor returned {type(result).__name__}, not an AG-UI event")
    if (
        type(result) is type(original)
        and result.__dict__ == original.__dict__
        and result.__pydantic_extra__ == original.__pydantic_extra__
    ):
        # Passed through unchanged (the common case): equal to our own valid event, so keep ours.
        return original
    if result.type != original.type:
        new_type = getattr(result.type, "value", result.type)
        raise AguiObservationError(f"the processor changed the event type from {original.type.value} to {new_type}")
    try:
        # A JSON round trip both validates strictly and detaches the result from anything the processor keeps.
        checked = type(original).model_validate_json(
            result.model_dump_json(by_alias=True, warnings="error"), strict=True
        )
    except (ValidationError, pydantic_core.PydanticSerializationError) as exc:
        raise AguiObservationError(f"the processor returned an invalid {original.type.value} event: {exc}") from exc
    mutable = MUTABLE_FIELDS.get(original.type, frozenset())
    before, after = original.__dict__, checked.__dict__
    changed = sorted(name for name, value in before.items() if name not in mutable and after[name] != value)
    if (checked.__pydantic_extra__ or None) != (original.__pydantic_extra__ or None):
        changed.append("extra fields")
    if changed:
        raise AguiObservationError(
            f"the processor changed structural fields of a {original.type.value} event: {', '.join(changed)}"
        )
    return checked
