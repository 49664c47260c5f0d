"""Items of a Harness Run stream.

A stream yields `HarnessEvent`s (a native pydantic-ai event or a small harness extension event, stamped with
the run's identity and a contiguous sequence number) and ends with one `HarnessRunResultEvent`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import (
    TYPE_CHECKING,
    Generic,
    Literal,
    Protocol,
    TypeAlias,
    Union,
    runtime_checkable,
)

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator, model_validator
from pydantic_ai import AgentStreamEvent

from ._result import OutputT

if TYPE_CHECKING:
    from ._result import HarnessRunResult

__all__ = (
    "MAX_EXTENSION_PAYLOAD_BYTES",
    "REDACTED",
    "AgentStreamEventProtocol",
    "ExtensionKind",
    "HarnessEvent",
    "HarnessExtensionEvent",
    "HarnessRunResultEvent",
    "HarnessStreamEvent",
    "InlineDelegationPayload",
    "is_run_started",
    "lifecycle_event",
    "run_started_event",
    "utc_now",
)


ExtensionKind = Literal[
    "context", "state", "recovery", "invocation", "delegation", "usage", "lifecycle", "tool", "diagnostic"
]

MAX_EXTENSION_PAYLOAD_BYTES = 64 * 1024
REDACTED = "[REDACTED]"

_SECRET_KEY = re.compile(
    r"^(?:.*[_-])?(?:secret|password|passwd|api[_-]?key|token|access[_-]?token|refresh[_-]?token"
    r"|authorization|credentials?|cookie|private[_-]?key)$",
    re.IGNORECASE,
)
_BEARER = re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]+")


@runtime_checkable
class AgentStreamEventProtocol(Protocol):
    """Anything a capability may emit as a stream event: it has a non-blank `event_kind`."""

    @property
    def event_kind(self) -> str: ...


def _redact(value: JsonValue) -> JsonValue:
    if isinstance(value, dict):
        return {key: REDACTED if _SECRET_KEY.match(key) else _redact(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_redact(item) for item in value]
    if isinstance(value, str):
        return _BEARER.sub(f"Bearer {REDACTED}", value)
    return value


class HarnessExtensionEvent(BaseModel):
    """A harness fact that pydantic-ai has no event for (run started, model request started, ...)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: str = "1"
    kind: ExtensionKind
    payload: JsonValue

    @field_validator("payload")
    @classmethod
    def _safe_payload(cls, payload: JsonValue) -> JsonValue:
        # Payloads reach browsers and journals: strip anything that looks like a credential, keep them small.
        payload = _redact(payload)
        try:
            encoded = json.dumps(payload, allow_nan=False).encode()
        except ValueError as exc:
            raise ValueError("extension payload must be finite JSON") from exc
        if len(encoded) > MAX_EXTENSION_PAYLOAD_BYTES:
            raise ValueError(f"extension payload exceeds {MAX_EXTENSION_PAYLOAD_BYTES} bytes")
        return payload

    @property
    def payload_type(self) -> str | None:
        if isinstance(self.payload, dict):
            kind = self.payload.get("type")
            return kind if isinstance(kind, str) else None
        return None

    @property
    def event_kind(self) -> str:
        return f"harness_{self.kind}"


def lifecycle_event(event_type: str, **payload: JsonValue) -> HarnessExtensionEvent:
    return HarnessExtensionEvent(kind="lifecycle", payload={"type": event_type, **payload})


def run_started_event() -> HarnessExtensionEvent:
    return lifecycle_event("run_started")


def is_run_started(event: object) -> bool:
    return (
        isinstance(event, HarnessExtensionEvent) and event.kind == "lifecycle" and event.payload_type == "run_started"
    )


class InlineDelegationPayload(BaseModel):
    """Payload of the `delegation` extension event that brackets an inline child run."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: Literal["inline_delegation"] = "inline_delegation"
    invocation_id: str = Field(pattern=r"^delegation-[0-9a-f]{32}$")
    action: Literal["started", "completed", "failed"]
    child_instance_id: str = Field(min_length=1)
    subagent: str = Field(min_length=1)
    status: str = Field(min_length=1)
    parent_run_id: str = Field(min_length=1)
    parent_agent_instance_id: str = Field(min_length=1)
    parent_tool_call_id: str | None = None
    child_run_id: str | None = None

    @model_validator(mode="after")
    def _child_run_known(self) -> InlineDelegationPayload:
        if self.action in ("started", "completed") and not self.child_run_id:
            raise ValueError(f"an inline delegation that {self.action} needs child_run_id")
        return self

    def to_event(self) -> HarnessExtensionEvent:
        return HarnessExtensionEvent(kind="delegation", payload=self.model_dump(mode="json", exclude_none=True))


def _check_identity(thread_id: object, run_id: object, sequence: object) -> None:
    if not isinstance(thread_id, str) or not thread_id.strip():
        raise ValueError("thread_id must be a non-blank string")
    if not isinstance(run_id, str) or not run_id.strip():
        raise ValueError("run_id must be a non-blank string")
    if isinstance(sequence, bool) or not isinstance(sequence, int) or sequence < 0:
        raise ValueError("sequence must be a non-negative int")


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class HarnessEvent:
    """One body item of a run: a native pydantic-ai event or a harness extension event."""

    thread_id: str
    run_id: str
    sequence: int
    occurred_at: datetime
    event: AgentStreamEvent | AgentStreamEventProtocol | HarnessExtensionEvent

    def __post_init__(self) -> None:
        _check_identity(self.thread_id, self.run_id, self.sequence)


@dataclass(frozen=True, slots=True)
class HarnessRunResultEvent(Generic[OutputT]):
    """The terminal item of a run, delivered only after the run was torn down cleanly."""

    thread_id: str
    run_id: str
    sequence: int
    occurred_at: datetime
    result: HarnessRunResult[OutputT]

    def __post_init__(self) -> None:
        from ._result import HarnessRunResult

        _check_identity(self.thread_id, self.run_id, self.sequence)
        if not isinstance(self.result, HarnessRunResult):
            raise TypeError("result must be a HarnessRunResult")
        if self.result.thread_id != self.thread_id or self.result.run_id != self.run_id:
            raise ValueError("the result belongs to a different thread or run than the event")


HarnessStreamEvent: TypeAlias = Union[HarnessEvent, HarnessRunResultEvent[OutputT]]  # noqa: UP007
"""Any item of a Harness Run stream."""
