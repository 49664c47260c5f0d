"""Multi-part conversion of one run's source items into AG-UI events.

pydantic-ai streams a model response as parts that start, grow by deltas and end. AG-UI wants messages and
tool calls that start, carry content and end exactly once. The bridge is a small set of open-part cursors per
run. The state holding them is immutable: converting an item works on a `RunConversion`, which copies the
cursor map only when the item touches it, so a failing item leaves the committed state as it was
without copying anything up front.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Literal

from ag_ui.core import (
    BaseEvent,
    ReasoningEncryptedValueEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from pydantic_ai.messages import (
    BaseToolCallPart,
    CapabilityEvent,
    DeferredToolResultsEvent,
    EnqueuedMessagesEvent,
    FunctionToolResultEvent,
    OutputToolResultEvent,
    PartDeltaEvent,
    PartEndEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    ThinkingPart,
    ThinkingPartDelta,
    ToolCallPart,
    ToolCallPartDelta,
)

from runs.harness import HarnessEvent, HarnessExtensionEvent, HarnessRunResultEvent, InputTextEvent

from ._envelopes import (
    HARNESS_PREFIX,
    INPUT_PREFIX,
    PYDANTIC_AI_PREFIX,
    envelope,
    extension_json,
    native_json,
    timestamp_ms,
)
from ._errors import AguiObservationError
from ._ids import IdClaims, IdLedger, scoped_id
from ._terminal import terminal_event
from ._tool_results import payload_free, tool_result_content

__all__ = ("PartCursor", "PartKind", "RunConversion", "RunConversionState", "SourceItem")

SourceItem = HarnessEvent | HarnessRunResultEvent[Any]
PartKind = Literal["text", "thinking", "tool"]


@dataclasses.dataclass(frozen=True, slots=True)
class PartCursor:
    """An open part of the current model response, keyed by its pydantic-ai part index.

    A text or reasoning cursor holds the AG-UI id its message was opened with and, in `source`, the provider's
    id; a tool cursor holds the source id, which becomes an AG-UI id when the call is emitted at its end.
    """

    kind: PartKind
    id: str
    minted: bool
    """The observer made the id up; a provider id arriving on a later tool delta may still claim the part."""
    source: str = ""
    tool_name: str = ""
    content_emitted: bool = False
    signature_emitted: bool = False


_NO_CURSORS: Mapping[int, PartCursor] = MappingProxyType({})
_NO_IDS: Mapping[str, str] = MappingProxyType({})


@dataclasses.dataclass(frozen=True, slots=True)
class RunConversionState:
    """All a run needs to continue mid-part: the current model request index, the open part cursors, and the
    AG-UI ids of tool calls whose id differs from the plain scoped source id (a repeated provider id)."""

    request_index: int = 0
    cursors: Mapping[int, PartCursor] = dataclasses.field(default_factory=lambda: _NO_CURSORS)
    tool_ids: Mapping[str, str] = dataclasses.field(default_factory=lambda: _NO_IDS)


class RunConversion:
    """The conversion of one source item against one run's state.

    Events are appended to `events` (shared when one item touches several runs, as a delegation completion
    does); `state()` gives the run's state after the item, the very same object when nothing changed. New
    AG-UI ids are claimed in `ids` (see `ids.py`); an inline child's source ids are namespaced by its run id.
    """

    __slots__ = (
        "_attribution",
        "_base",
        "_cursors",
        "_tool_ids",
        "events",
        "ids",
        "item",
        "request_index",
        "run_id",
        "subagent_run_id",
        "timestamp",
    )

    def __init__(
        self,
        state: RunConversionState,
        item: SourceItem,
        events: list[BaseEvent],
        *,
        ids: IdClaims | None = None,
        run_id: str | None = None,
        subagent_run_id: str | None = None,
    ) -> None:
        self._base = state
        self._cursors: dict[int, PartCursor] | None = None
        self._tool_ids: dict[str, str] | None = None
        self._attribution = {"subagent_run_id": subagent_run_id} if subagent_run_id else {}
        self.subagent_run_id = subagent_run_id
        self.ids = ids if ids is not None else IdLedger().claims()
        self.item = item
        self.run_id = run_id or item.run_id
        self.request_index = state.request_index
        self.events = events
        self.timestamp = timestamp_ms(item.occurred_at)

    def state(self) -> RunConversionState:
        base = self._base
        if self._cursors is None and self._tool_ids is None and self.request_index == base.request_index:
            return base
        cursors = base.cursors if self._cursors is None else MappingProxyType(self._cursors)
        tool_ids = base.tool_ids if self._tool_ids is None else MappingProxyType(self._tool_ids)
        return RunConversionState(self.request_index, cursors, tool_ids)

    def message_id(self, source_id: str, *, minted: bool) -> str:
        """Claim the AG-UI id of a new message; minted ids already carry the run id, provider ids get scoped."""
        return self.ids.claim(source_id if minted else scoped_id(source_id, self.subagent_run_id))

    def open_tool_call(self, source_id: str, *, minted: bool) -> str:
        """Claim the AG-UI id of a tool call being emitted, and remember it when it is not the plain one."""
        plain = source_id if minted else scoped_id(source_id, self.subagent_run_id)
        agui_id = self.ids.claim(plain)
        if agui_id != plain or source_id in self._base.tool_ids:
            if self._tool_ids is None:
                self._tool_ids = dict(self._base.tool_ids)
            if agui_id == plain:
                self._tool_ids.pop(source_id, None)
            else:
                self._tool_ids[source_id] = agui_id
        return agui_id

    def tool_call_id(self, source_id: str) -> str:
        """The AG-UI id of the latest tool call of this run with `source_id` (for results and interrupts)."""
        tool_ids = self._base.tool_ids if self._tool_ids is None else self._tool_ids
        return tool_ids.get(source_id) or scoped_id(source_id, self.subagent_run_id)

    def cursor(self, index: int) -> PartCursor | None:
        return (self._base.cursors if self._cursors is None else self._cursors).get(index)

    def put(self, index: int, cursor: PartCursor | None) -> None:
        if self._cursors is None:
            if cursor is None and index not in self._base.cursors:
                return
            self._cursors = dict(self._base.cursors)
        if cursor is None:
            self._cursors.pop(index, None)
        else:
            self._cursors[index] = cursor

    def minted_id(self, index: int, kind: str) -> str:
        return f"{self.run_id}:request-{self.request_index}:part-{index}:{kind}"

    def emit(self, event_type: type[BaseEvent], **fields: Any) -> None:
        self.events.append(event_type(timestamp=self.timestamp, **self._attribution, **fields))

    def emit_custom(self, name: str, event: Any) -> None:
        item = self.item
        self.events.append(
            envelope(
                name,
                thread_id=item.thread_id,
                run_id=item.run_id,
                sequence=item.sequence,
                occurred_at=item.occurred_at,
                event=event,
                subagent_run_id=self._attribution.get("subagent_run_id"),
            )
        )

    def convert(self) -> None:
        """Convert `item` (the whole conversion table, for one run)."""
        item = self.item
        if isinstance(item, HarnessRunResultEvent):
            self.close_messages()
            self.events.append(terminal_event(item, self.tool_call_id))
            return
        event = item.event
        (_handler(type(event)) or _fallback)(self, event)

    def close_messages(self) -> None:
        """End every open text and reasoning message; open tool calls never reached AG-UI, so they just go."""
        cursors = self._base.cursors if self._cursors is None else self._cursors
        for index in sorted(cursors):
            cursor = cursors[index]
            if cursor.kind == "text":
                self.emit(TextMessageEndEvent, message_id=cursor.id)
            elif cursor.kind == "thinking":
                self.emit(ReasoningMessageEndEvent, message_id=cursor.id)
        if cursors:
            self._cursors = {}


def _require_kind(cursor: PartCursor, kind: PartKind, index: int) -> None:
    if cursor.kind != kind:
        raise AguiObservationError(f"part {index} changed kind from {cursor.kind} to {kind}")


def _fallback(conversion: RunConversion, event: Any) -> None:
    conversion.emit_custom(PYDANTIC_AI_PREFIX + event.event_kind, native_json(event))


def _part_start(conversion: RunConversion, event: PartStartEvent) -> None:
    index, part = event.index, event.part
    if isinstance(part, TextPart):
        message_id = conversion.message_id(part.id or conversion.minted_id(index, "text"), minted=not part.id)
        conversion.emit(TextMessageStartEvent, message_id=message_id, role="assistant")
        if part.content:
            conversion.emit(TextMessageContentEvent, message_id=message_id, delta=part.content)
        conversion.put(
            index,
            PartCursor("text", message_id, not part.id, source=part.id or "", content_emitted=bool(part.content)),
        )
    elif isinstance(part, ThinkingPart):
        # Native reasoning ids are ignored: one provider item may hold several summary parts with one id.
        message_id = conversion.message_id(conversion.minted_id(index, "reasoning"), minted=True)
        conversion.emit(ReasoningMessageStartEvent, message_id=message_id, role="reasoning")
        if part.content:
            conversion.emit(ReasoningMessageContentEvent, message_id=message_id, delta=part.content)
        if part.signature is not None:
            _encrypted(conversion, message_id, part.signature)
        conversion.put(
            index,
            PartCursor(
                "thinking",
                message_id,
                True,
                content_emitted=bool(part.content),
                signature_emitted=part.signature is not None,
            ),
        )
    else:
        if isinstance(part, BaseToolCallPart):
            tool_call_id = part.tool_call_id or conversion.minted_id(index, "tool")
            conversion.put(index, PartCursor("tool", tool_call_id, not part.tool_call_id, tool_name=part.tool_name))
        else:
            conversion.put(index, None)
        _fallback(conversion, event)


def _part_delta(conversion: RunConversion, event: PartDeltaEvent) -> None:
    index, delta = event.index, event.delta
    cursor = conversion.cursor(index)
    if isinstance(delta, TextPartDelta):
        if cursor is not None:
            _require_kind(cursor, "text", index)
        if not delta.content_delta:
            _fallback(conversion, event)
            return
        if cursor is None:
            cursor = PartCursor("text", conversion.message_id(conversion.minted_id(index, "text"), minted=True), True)
            conversion.emit(TextMessageStartEvent, message_id=cursor.id, role="assistant")
        conversion.emit(TextMessageContentEvent, message_id=cursor.id, delta=delta.content_delta)
        if not cursor.content_emitted:
            conversion.put(index, dataclasses.replace(cursor, content_emitted=True))
    elif isinstance(delta, ThinkingPartDelta):
        if cursor is not None:
            _require_kind(cursor, "thinking", index)
        content, signature = delta.content_delta, delta.signature_delta
        if not content and signature is None:
            _fallback(conversion, event)
            return
        opened = cursor is None
        if cursor is None:
            cursor = _minted_reasoning(conversion, index)
            conversion.emit(ReasoningMessageStartEvent, message_id=cursor.id, role="reasoning")
        if content:
            conversion.emit(ReasoningMessageContentEvent, message_id=cursor.id, delta=content)
        if signature is not None:
            _encrypted(conversion, cursor.id, signature)
        content_emitted = cursor.content_emitted or bool(content)
        signature_emitted = cursor.signature_emitted or signature is not None
        if opened or content_emitted != cursor.content_emitted or signature_emitted != cursor.signature_emitted:
            conversion.put(
                index,
                dataclasses.replace(cursor, content_emitted=content_emitted, signature_emitted=signature_emitted),
            )
    elif isinstance(delta, ToolCallPartDelta):
        _tool_delta(conversion, index, cursor, delta)
        _fallback(conversion, event)
    else:
        _fallback(conversion, event)


def _tool_delta(conversion: RunConversion, index: int, cursor: PartCursor | None, delta: ToolCallPartDelta) -> None:
    if cursor is None:
        tool_call_id = delta.tool_call_id or conversion.minted_id(index, "tool")
        updated = PartCursor("tool", tool_call_id, not delta.tool_call_id, tool_name=delta.tool_name_delta or "")
    else:
        _require_kind(cursor, "tool", index)
        updated = cursor
        if delta.tool_call_id and delta.tool_call_id != cursor.id:
            if not cursor.minted:
                raise AguiObservationError(
                    f"tool call at part {index} changed id from {cursor.id!r} to {delta.tool_call_id!r}"
                )
            updated = dataclasses.replace(updated, id=delta.tool_call_id, minted=False)
        if delta.tool_name_delta:
            updated = dataclasses.replace(updated, tool_name=updated.tool_name + delta.tool_name_delta)
    if updated is not cursor:
        conversion.put(index, updated)


def _part_end(conversion: RunConversion, event: PartEndEvent) -> None:
    index, part = event.index, event.part
    cursor = conversion.cursor(index)
    if isinstance(part, TextPart):
        if cursor is None:
            message_id = conversion.message_id(part.id or conversion.minted_id(index, "text"), minted=not part.id)
            cursor = PartCursor("text", message_id, not part.id, source=part.id or "")
            conversion.emit(TextMessageStartEvent, message_id=cursor.id, role="assistant")
        else:
            _require_kind(cursor, "text", index)
            if part.id and (cursor.minted or part.id != cursor.source):
                opened = "a minted id" if cursor.minted else repr(cursor.source)
                raise AguiObservationError(f"text part {index} changed id from {opened} to {part.id!r}")
        if not cursor.content_emitted and part.content:
            conversion.emit(TextMessageContentEvent, message_id=cursor.id, delta=part.content)
        conversion.emit(TextMessageEndEvent, message_id=cursor.id)
    elif isinstance(part, ThinkingPart):
        if cursor is None:
            cursor = _minted_reasoning(conversion, index)
            conversion.emit(ReasoningMessageStartEvent, message_id=cursor.id, role="reasoning")
        else:
            _require_kind(cursor, "thinking", index)
        if not cursor.content_emitted and part.content:
            conversion.emit(ReasoningMessageContentEvent, message_id=cursor.id, delta=part.content)
        if not cursor.signature_emitted and part.signature is not None:
            _encrypted(conversion, cursor.id, part.signature)
        conversion.emit(ReasoningMessageEndEvent, message_id=cursor.id)
    elif isinstance(part, ToolCallPart):
        if cursor is None:
            source_id, minted = part.tool_call_id or conversion.minted_id(index, "tool"), not part.tool_call_id
            tool_name = part.tool_name
        else:
            _require_kind(cursor, "tool", index)
            # The id the call was opened with wins: that is the id any earlier observer output used.
            source_id, minted, tool_name = cursor.id, cursor.minted, part.tool_name or cursor.tool_name
        tool_call_id = conversion.open_tool_call(source_id, minted=minted)
        conversion.emit(ToolCallStartEvent, tool_call_id=tool_call_id, tool_call_name=tool_name)
        if part.args is not None:
            conversion.emit(ToolCallArgsEvent, tool_call_id=tool_call_id, delta=_args_text(part.args))
        conversion.emit(ToolCallEndEvent, tool_call_id=tool_call_id)
    else:
        if cursor is not None:
            _require_kind(cursor, "tool" if isinstance(part, BaseToolCallPart) else cursor.kind, index)
        _fallback(conversion, event)
    conversion.put(index, None)


def _args_text(args: str | Mapping[str, object]) -> str:
    # Mapping, not dict: pydantic-ai's tool-search and capability-loading calls carry TypedDict arguments.
    if isinstance(args, str):
        return args
    return json.dumps(args, sort_keys=True, separators=(",", ":"))


def _minted_reasoning(conversion: RunConversion, index: int) -> PartCursor:
    return PartCursor("thinking", conversion.message_id(conversion.minted_id(index, "reasoning"), minted=True), True)


def _encrypted(conversion: RunConversion, message_id: str, value: str) -> None:
    conversion.emit(ReasoningEncryptedValueEvent, subtype="message", entity_id=message_id, encrypted_value=value)


def _tool_result(conversion: RunConversion, event: FunctionToolResultEvent | OutputToolResultEvent) -> None:
    # Every return answers its call, whatever its outcome: an AG-UI client keeps a call open until a result names
    # it, and a denied or refused deferred call was started by the run that asked, not by this one.
    part = event.part
    tool_call_id = conversion.tool_call_id(part.tool_call_id)
    conversion.emit(
        ToolCallResultEvent,
        message_id=conversion.ids.claim(f"{tool_call_id}:result"),
        tool_call_id=tool_call_id,
        content=tool_result_content(part),
        role="tool",
    )
    if part.outcome == "success":
        return
    # TOOL_CALL_RESULT has no field for the outcome (denied, failed, ...): the native event that says it follows.
    # Media payloads (the result carries them) and the extra user content stay out of it: they are large and the
    # browser has nothing to render them against.
    changes: dict[str, Any] = {"part": payload_free(part)}
    if isinstance(event, FunctionToolResultEvent):
        changes["content"] = None
    _fallback(conversion, dataclasses.replace(event, **changes))


def _enqueued_messages(conversion: RunConversion, event: EnqueuedMessagesEvent) -> None:
    # The messages themselves reach the timeline through the input events derived from them.
    conversion.emit_custom(
        PYDANTIC_AI_PREFIX + event.event_kind, {"event_kind": event.event_kind, "enqueue_id": event.enqueue_id}
    )


def _deferred_tool_results(conversion: RunConversion, event: DeferredToolResultsEvent) -> None:
    # Results may carry tool output or media; which calls were answered is what a timeline shows.
    conversion.emit_custom(
        PYDANTIC_AI_PREFIX + event.event_kind,
        {
            "event_kind": event.event_kind,
            "call_ids": list(event.results.calls),
            "approval_ids": list(event.results.approvals),
        },
    )


def _input_text(conversion: RunConversion, event: InputTextEvent) -> None:
    item = conversion.item
    conversion.emit_custom(
        f"{INPUT_PREFIX}{event.source}",
        {
            "input_id": event.input_id,
            "source": event.source,
            "content": event.content,
            "message_id": f"{item.run_id}:input:{item.sequence}",
            "role": event.role,
        },
    )


def _capability_event(conversion: RunConversion, event: CapabilityEvent) -> None:
    conversion.emit_custom(event.kind or PYDANTIC_AI_PREFIX + event.event_kind, native_json(event))


def _extension(conversion: RunConversion, event: HarnessExtensionEvent) -> None:
    payload_type = event.payload_type
    if event.kind == "lifecycle":
        if payload_type == "run_started":
            item = conversion.item
            conversion.events.append(
                RunStartedEvent(
                    thread_id=item.thread_id,
                    run_id=item.run_id,
                    protocol_version="1.0",
                    timestamp=conversion.timestamp,
                )
            )
            return
        if payload_type == "model_request_started":
            assert isinstance(event.payload, dict)
            request_index = event.payload.get("request_index")
            if isinstance(request_index, int) and not isinstance(request_index, bool):
                conversion.request_index = request_index
    name = HARNESS_PREFIX + event.kind
    if event.kind == "tool" and payload_type == "tool_extra":
        assert isinstance(event.payload, dict)
        tool_name = event.payload.get("name")
        if isinstance(tool_name, str) and tool_name:
            name = f"{name}.{tool_name}"
    conversion.emit_custom(name, extension_json(event))


_HANDLERS: dict[type[Any], Callable[[RunConversion, Any], None]] = {
    PartStartEvent: _part_start,
    PartDeltaEvent: _part_delta,
    PartEndEvent: _part_end,
    FunctionToolResultEvent: _tool_result,
    OutputToolResultEvent: _tool_result,
    EnqueuedMessagesEvent: _enqueued_messages,
    DeferredToolResultsEvent: _deferred_tool_results,
    InputTextEvent: _input_text,
    CapabilityEvent: _capability_event,
    HarnessExtensionEvent: _extension,
}
_RESOLVED: dict[type[Any], Callable[[RunConversion, Any], None] | None] = {}


def _handler(event_type: type[Any]) -> Callable[[RunConversion, Any], None] | None:
    """The handler for an event class, found once along its MRO (capability events are subclasses)."""
    try:
        return _RESOLVED[event_type]
    except KeyError:
        handler = next((_HANDLERS[base] for base in event_type.__mro__ if base in _HANDLERS), None)
        _RESOLVED[event_type] = handler
        return handler
