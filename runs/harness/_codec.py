"""The versioned codec of journal items: `HarnessStreamEvent` values to stored text and back.

Native pydantic-ai events go through pydantic-ai's own `AgentStreamEvent` union (a TypeAdapter), harness
extension events and result parts through their pydantic models, so nothing is hand-encoded. Every stored row
records the codec version it was written with; rows of an older version are upgraded on read.

Version history:
1. flat layout ``{"item": "event"|"extension"|"result", "thread_id", "run_id", "sequence", "occurred_at",
   "data"}`` with extension events stored without their ``schema_version``.
2. the identity fields plus a ``body`` discriminated by ``source``; extension events stored whole.
3. (current) a result body may say ``state_checkpointed`` instead of holding its state: the Host stores that state
   once, as the checkpoint recorded at the result's journal index, and the journal reader loads it from there.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal

import pydantic_core
from pydantic import BaseModel, Field, JsonValue, TypeAdapter, ValidationError
from pydantic_ai import AgentStreamEvent

from ._deferred import DeferredToolResume, PendingDeferredCalls
from ._events import HarnessEvent, HarnessExtensionEvent, HarnessRunResultEvent, HarnessStreamEvent
from ._result import HarnessRunResult, RunOutcome, RunUsageSummary, SafeFailure, SuspendReason
from ._state import HarnessState

__all__ = (
    "CODEC_VERSION",
    "CodecError",
    "EncodedItem",
    "decode_item",
    "decode_resume",
    "encode_item",
    "encode_resume",
)

CODEC_VERSION = 3


class CodecError(ValueError):
    """A journal item that cannot be encoded or decoded; the message says which and why."""


class _NativeBody(BaseModel):
    source: Literal["native"] = "native"
    event: AgentStreamEvent


class _ExtensionBody(BaseModel):
    source: Literal["extension"] = "extension"
    event: HarnessExtensionEvent


class _ResultBody(BaseModel):
    """A `HarnessRunResult`; the output is kept as the JSON the result itself renders (`output_json()`)."""

    source: Literal["result"] = "result"
    status: RunOutcome
    output: JsonValue = None
    state: HarnessState | None = None
    state_checkpointed: bool = False
    failure: SafeFailure | None = None
    suspend_reason: SuspendReason | None = None
    deferred: PendingDeferredCalls | None = None
    usage: RunUsageSummary = Field(default_factory=RunUsageSummary)


class _StoredItem(BaseModel):
    thread_id: str
    run_id: str
    sequence: int
    occurred_at: datetime
    body: Annotated[_NativeBody | _ExtensionBody | _ResultBody, Field(discriminator="source")]


_STORED_ITEM = TypeAdapter(_StoredItem)
_RESUME = TypeAdapter(DeferredToolResume)


@dataclass(frozen=True, slots=True)
class EncodedItem:
    """What the journal stores for one item."""

    source_run_id: str
    source_sequence: int
    occurred_at: datetime
    kind: str
    payload: str
    codec_version: int = CODEC_VERSION


def item_kind(item: HarnessStreamEvent[Any]) -> str:
    """A short, queryable label: ``part_start``, ``harness.lifecycle.run_started``, ``result.completed``."""
    if isinstance(item, HarnessRunResultEvent):
        return f"result.{item.result.status}"
    event = item.event
    if isinstance(event, HarnessExtensionEvent):
        suffix = f".{event.payload_type}" if event.payload_type else ""
        return f"harness.{event.kind}{suffix}"[:64]
    return str(getattr(event, "event_kind", type(event).__name__))[:64]


def encode_item(item: HarnessStreamEvent[Any], *, state_checkpointed: bool = False) -> EncodedItem:
    """Encode one stream item with the current codec version.

    With `state_checkpointed` a result item leaves its state out and says so: the caller stores that state as
    the checkpoint at the item's journal index, in the same transaction.
    """
    state_json: str | None = None
    if isinstance(item, HarnessRunResultEvent):
        result = item.result
        by_reference = state_checkpointed and result.state is not None
        # The state goes in as the JSON text it keeps (see `_with_state`), not through its parsed history.
        state_json = None if result.state is None or by_reference else result.state.model_dump_json()
        body: _NativeBody | _ExtensionBody | _ResultBody = _ResultBody(
            status=result.status,
            output=json.loads(result.output_json()),
            state=None,
            state_checkpointed=by_reference,
            failure=result.failure,
            suspend_reason=result.suspend_reason,
            deferred=result.deferred,
            usage=result.usage,
        )
    elif isinstance(item, HarnessEvent):
        if isinstance(item.event, HarnessExtensionEvent):
            body = _ExtensionBody(event=item.event)
        else:
            try:
                body = _NativeBody(event=item.event)
            except ValidationError as exc:
                raise CodecError(
                    f"journal cannot encode a {type(item.event).__name__} event of run {item.run_id} "
                    f"(sequence {item.sequence}): it is not a pydantic-ai stream event"
                ) from exc
    else:
        raise TypeError(f"expected a HarnessStreamEvent, got {type(item).__name__}")
    # Not validated again: the envelope's fields come typed from the item, and the body was just validated.
    # Validating the envelope would check the body a second time, which was most of the time an item took.
    stored = _StoredItem.model_construct(
        thread_id=item.thread_id,
        run_id=item.run_id,
        sequence=item.sequence,
        occurred_at=item.occurred_at,
        body=body,
    )
    try:
        if state_json is None:
            payload = _STORED_ITEM.dump_json(stored).decode()
        else:
            payload = _with_state(_STORED_ITEM.dump_json(stored, exclude={"body": {"state"}}).decode(), state_json)
    except pydantic_core.PydanticSerializationError as exc:
        raise CodecError(f"journal cannot encode item {item.sequence} of run {item.run_id}: {exc}") from exc
    return EncodedItem(
        source_run_id=item.run_id,
        source_sequence=item.sequence,
        occurred_at=item.occurred_at,
        kind=item_kind(item),
        payload=payload,
    )


def _with_state(payload: str, state_json: str) -> str:
    """`payload` (a result item dumped without its state) with the state's JSON text as the body's last key.

    `body` is the stored item's last field, so the payload ends with the body's `}` and the item's `}`; a
    reader validates the body by its keys, whatever their order.
    """
    if not payload.endswith("}}"):
        raise CodecError("a result item's payload does not end with its body")
    return f'{payload[:-2]},"state":{state_json}}}}}'


def _upgrade_v1(raw: dict[str, Any]) -> dict[str, Any]:
    item = raw.pop("item", None)
    data = raw.pop("data", None)
    if item == "event":
        raw["body"] = {"source": "native", "event": data}
    elif item == "extension":
        raw["body"] = {"source": "extension", "event": {"schema_version": "1", **(data or {})}}
    elif item == "result":
        raw["body"] = {"source": "result", **(data or {})}
    else:
        raise ValueError(f"unknown version-1 item type {item!r}")
    return raw


def _upgrade_v2(raw: dict[str, Any]) -> dict[str, Any]:
    # Version 3 only added an optional key: a version-2 result holds its state inline.
    return raw


_UPGRADES: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: _upgrade_v1, 2: _upgrade_v2}


def decode_item(
    payload: str, codec_version: int, *, checkpointed_state: Callable[[], HarnessState] | None = None
) -> HarnessStreamEvent[Any]:
    """Decode a stored item of any known codec version into the value the stream once yielded.

    A result whose state was stored as a checkpoint gets it from `checkpointed_state`; without one it is refused,
    since a result silently missing its state would read as a result that never had one.
    """
    if codec_version > CODEC_VERSION or codec_version < 1:
        raise CodecError(f"journal item has codec version {codec_version}; this Host reads 1..{CODEC_VERSION}")
    try:
        raw = json.loads(payload)
        for version in range(codec_version, CODEC_VERSION):
            raw = _UPGRADES[version](raw)
        stored = _STORED_ITEM.validate_python(raw)
    except (ValueError, TypeError, ValidationError) as exc:
        raise CodecError(f"undecodable journal item (codec version {codec_version}): {exc}") from exc
    body = stored.body
    if isinstance(body, _ResultBody):
        state = body.state
        if body.state_checkpointed:
            if checkpointed_state is None:
                raise CodecError(
                    f"result item {stored.sequence} of run {stored.run_id} keeps its state in a checkpoint; "
                    "read it through the journal"
                )
            state = checkpointed_state()
        result: HarnessRunResult[Any] = HarnessRunResult(
            thread_id=stored.thread_id,
            run_id=stored.run_id,
            status=body.status,
            output=body.output,
            state=state,
            failure=body.failure,
            suspend_reason=body.suspend_reason,
            deferred=body.deferred,
            usage=body.usage,
        )
        return HarnessRunResultEvent(stored.thread_id, stored.run_id, stored.sequence, stored.occurred_at, result)
    return HarnessEvent(stored.thread_id, stored.run_id, stored.sequence, stored.occurred_at, body.event)


def encode_resume(resume: DeferredToolResume) -> JsonValue:
    """A `DeferredToolResume` as JSON for a Run's `deferred_resume` or a checkpoint's pending input."""
    encoded: JsonValue = _RESUME.dump_python(resume, mode="json")
    return encoded


def decode_resume(value: JsonValue, *, recovery: bool | None = None) -> DeferredToolResume:
    """Decode a stored resume; `recovery` overrides the stored flag (a retained batch resumes with True)."""
    resume = _RESUME.validate_python(value)
    if recovery is not None and resume.recovery != recovery:
        resume = DeferredToolResume(resume.requests, resume.results, recovery=recovery)
    return resume
