"""`HarnessState`: the portable continuation value of one Thread.

Mutable parts (message history, capability data, environment state) are held as canonical JSON bytes and
decoded afresh on every read, so a caller can never change a state by mutating what it got back, and two
states with the same content compare equal.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from copy import deepcopy
from typing import Annotated, Any, Literal, Self

import pydantic
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    PlainSerializer,
    PlainValidator,
    computed_field,
    model_validator,
)
from pydantic_ai import ModelMessage, ModelMessagesTypeAdapter, ModelRequest, ModelResponse

__all__ = (
    "THREAD_ID_PATTERN",
    "AgentContextStateSnapshot",
    "CanonicalJson",
    "CapabilityState",
    "EnvironmentState",
    "HarnessState",
    "HistoryEncoder",
    "StoredRef",
    "encode_environment_states",
    "new_thread_id",
)

THREAD_ID_PATTERN = r"^(?:thread-[a-f0-9]{32}|[a-z][a-z0-9]*_[a-z0-9]+)$"

_JSON_VALUE = pydantic.TypeAdapter(JsonValue)


def new_thread_id() -> str:
    return f"thread_{uuid.uuid4().hex}"


def _canonical_json(value: Any) -> bytes:
    """Encode strict, finite JSON with sorted keys, so equal content gives equal bytes."""
    value = _JSON_VALUE.validate_python(value)
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()
    except ValueError as exc:
        raise ValueError("JSON values must be finite numbers") from exc


def _encode_messages(value: Any) -> bytes:
    if isinstance(value, str | bytes):
        raise ValueError("invalid message history: expected a sequence of messages")
    try:
        items = list(value)
        if all(isinstance(item, ModelRequest | ModelResponse) for item in items):
            messages = ModelMessagesTypeAdapter.validate_python(items)
        else:
            messages = _validate_dumped_messages(items)
    except (pydantic.ValidationError, TypeError) as exc:
        raise ValueError(f"invalid message history: {exc}") from exc
    return ModelMessagesTypeAdapter.dump_json(messages)


def _validate_dumped_messages(items: list[Any]) -> list[ModelMessage]:
    try:
        text = json.dumps(items)
    except TypeError:
        # A python-mode dump (datetimes, bytes) is validated as the Python objects it holds.
        return ModelMessagesTypeAdapter.validate_python(items)
    # Plain JSON values (from `model_validate_json` or a JSON dump) go through the JSON path so that base64
    # binary content decodes exactly as pydantic-ai encoded it.
    return ModelMessagesTypeAdapter.validate_json(text)


def _dump_messages(messages: Sequence[ModelMessage]) -> Any:
    return ModelMessagesTypeAdapter.dump_python(list(messages), mode="json")


_MESSAGE = pydantic.TypeAdapter(ModelMessage)


class HistoryEncoder:
    """Encodes a growing message history, re-encoding only the messages it has not encoded before.

    A run's history only grows, and its messages are the same objects from one export to the next, so a
    message is reused when the same object sits at the same index. The last message encoded is always encoded
    again: it may be the response still being completed in place.

    `encode_message` encodes one message (by default as `ModelMessagesTypeAdapter` encodes each message of a
    list); passing a wrapper of it shows which messages are encoded again.
    """

    def __init__(self, encode_message: Callable[[ModelMessage], bytes] = _MESSAGE.dump_json) -> None:
        self._encode_message = encode_message
        self._messages: list[ModelMessage] = []
        self._encoded: list[bytes] = []

    def encode(self, messages: Sequence[ModelMessage]) -> bytes:
        """The same bytes as `ModelMessagesTypeAdapter.dump_json(messages)`."""
        kept = 0
        limit = min(len(self._messages) - 1, len(messages))
        while kept < limit and messages[kept] is self._messages[kept]:
            kept += 1
        fresh = list(messages[kept:])
        for message in fresh:
            if not isinstance(message, ModelRequest | ModelResponse):
                raise ValueError(f"invalid message history: {type(message).__name__} is not a model message")
        self._messages[kept:] = fresh
        self._encoded[kept:] = [self._encode_message(message) for message in fresh]
        return b"[" + b",".join(self._encoded) + b"]"


CanonicalJson = Annotated[bytes, PlainValidator(_canonical_json)]
"""A JSON value held as canonical bytes; models expose it through a computed property."""


def _loaded(canonical: bytes) -> JsonValue:
    value: JsonValue = json.loads(canonical)
    return value


class CapabilityState(BaseModel):
    """One capability namespace: an exact version and an independent JSON value."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: str = Field(min_length=1)
    data_json: CanonicalJson = Field(validation_alias="data", exclude=True, repr=False)

    @computed_field  # type: ignore[prop-decorator]  # mypy takes no decorator over a @property
    @property
    def data(self) -> JsonValue:
        return _loaded(self.data_json)


def _encode_entries(value: Any) -> bytes:
    if not isinstance(value, Mapping):
        raise ValueError("capability entries must be a mapping of capability id to state")
    entries: dict[str, Any] = {}
    for capability_id, entry in value.items():
        if not isinstance(capability_id, str) or not capability_id.strip():
            raise ValueError("capability ids must be non-blank strings")
        state = CapabilityState.model_validate(entry)
        entries[capability_id] = {"version": state.version, "data": state.data}
    return _canonical_json(entries)


class AgentContextStateSnapshot(BaseModel):
    """An immutable snapshot of every capability namespace of a Thread."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    entries_json: Annotated[bytes, PlainValidator(_encode_entries)] = Field(
        default=b"{}", validation_alias="entries", exclude=True, repr=False
    )

    @computed_field  # type: ignore[prop-decorator]  # mypy takes no decorator over a @property
    @property
    def entries(self) -> dict[str, CapabilityState]:
        return {key: CapabilityState.model_validate(raw) for key, raw in json.loads(self.entries_json).items()}

    def get(self, capability_id: str) -> CapabilityState | None:
        raw = json.loads(self.entries_json).get(capability_id)
        return None if raw is None else CapabilityState.model_validate(raw)


class EnvironmentState(BaseModel):
    """Provider-specific portable state of one already-selected environment mount."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    provider_key: str = Field(pattern=r"^[a-z][a-z0-9_]{0,63}$")
    state_version: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    state_json: CanonicalJson = Field(validation_alias="state", exclude=True, repr=False)

    @computed_field  # type: ignore[prop-decorator]  # mypy takes no decorator over a @property
    @property
    def state(self) -> JsonValue:
        return _loaded(self.state_json)


def encode_environment_states(value: Any) -> bytes:
    if not isinstance(value, Mapping):
        raise ValueError("environment states must be a mapping of mount name to state")
    states: dict[str, Any] = {}
    for mount, entry in value.items():
        if not isinstance(mount, str) or not mount.strip():
            raise ValueError("environment mount names must be non-blank strings")
        states[mount] = EnvironmentState.model_validate(entry).model_dump(mode="json")
    return _canonical_json(states)


class StoredRef(BaseModel):
    """A reference to a blob a Host state store saved for this state."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str = Field(min_length=1, max_length=1024)
    digest: str = Field(pattern=r"^[0-9a-f]{64}$")
    size: int = Field(ge=0)


class HarnessState(BaseModel):
    """Portable continuation of one independently advancing Thread.

    It restores data, never authority: no models, tools, credentials, approvals or Host lifecycle facts live
    here. Top-level fields unknown to this version are kept verbatim and travel into exports and forks.
    """

    model_config = ConfigDict(frozen=True, extra="allow")

    schema_version: Literal["1"]
    thread_id: str = Field(max_length=256, pattern=THREAD_ID_PATTERN)
    agent_context_state: AgentContextStateSnapshot = Field(default_factory=AgentContextStateSnapshot)
    refs: tuple[StoredRef, ...] = ()
    message_history_json: Annotated[bytes, PlainValidator(_encode_messages)] = Field(
        default=b"[]", validation_alias="message_history", exclude=True, repr=False
    )
    environment_states_json: Annotated[bytes, PlainValidator(encode_environment_states)] = Field(
        default=b"{}", validation_alias="environment_states", exclude=True, repr=False
    )

    @model_validator(mode="after")
    def _detach_extra_fields(self) -> Self:
        # Unknown top-level fields must be strict JSON, and are held as fresh copies of what the caller passed.
        extra = self.__pydantic_extra__ or {}
        try:
            frozen = {name: json.loads(_canonical_json(value)) for name, value in extra.items()}
        except pydantic.ValidationError as exc:
            raise ValueError(f"unknown top-level fields must be strict JSON: {exc}") from exc
        object.__setattr__(self, "__pydantic_extra__", frozen)
        return self

    @property
    def model_extra(self) -> dict[str, Any] | None:
        """The unknown top-level fields, as a copy: changing it never changes the state."""
        return deepcopy(self.__pydantic_extra__)

    def __getattr__(self, name: str) -> Any:
        # pydantic defines BaseModel.__getattr__ only where type checkers do not look.
        value = super().__getattr__(name)  # type: ignore[misc]
        return deepcopy(value) if name in (self.__pydantic_extra__ or {}) else value

    @computed_field  # type: ignore[prop-decorator]  # mypy takes no decorator over a @property
    @property
    def message_history(
        self,
    ) -> Annotated[tuple[ModelMessage, ...], PlainSerializer(_dump_messages, when_used="json")]:
        return tuple(ModelMessagesTypeAdapter.validate_json(self.message_history_json))

    @computed_field  # type: ignore[prop-decorator]  # mypy takes no decorator over a @property
    @property
    def environment_states(self) -> dict[str, EnvironmentState]:
        return {
            mount: EnvironmentState.model_validate(raw)
            for mount, raw in json.loads(self.environment_states_json).items()
        }

    def model_dump_json(self, **kwargs: Any) -> str:
        """Pydantic's JSON; without options, the history is written from its canonical bytes as they are.

        Parsing the history back into messages only to encode them again would cost a whole-history round
        trip at every checkpoint. The history is the second-to-last key (computed fields follow the fields and
        extra fields), so it goes in right before the environment states, where pydantic would write it.
        """
        if kwargs:
            return super().model_dump_json(**kwargs)
        rest = super().model_dump_json(exclude={"message_history"})
        last = super().model_dump_json(include={"environment_states"})[1:]
        return f'{rest[: -len(last)]}"message_history":{self.message_history_json.decode()},{last}'

    def with_encoded_history(
        self, history: bytes, *, agent_context_state: AgentContextStateSnapshot, environment_states_json: bytes
    ) -> HarnessState:
        """A new envelope of the same Thread whose history is `history`, bytes a `HistoryEncoder` produced.

        For the engine's own exports: the messages were encoded from validated pydantic-ai messages a moment
        ago, so validating and encoding the whole history again at every boundary is skipped.
        """
        return self.model_copy(
            update={
                "message_history_json": history,
                "agent_context_state": agent_context_state,
                "environment_states_json": environment_states_json,
            }
        )

    @classmethod
    def new(
        cls,
        *,
        thread_id: str | None = None,
        message_history: Sequence[ModelMessage] = (),
        agent_context_state: AgentContextStateSnapshot | None = None,
        environment_states: Mapping[str, EnvironmentState] | None = None,
    ) -> HarnessState:
        """Start a Thread with an explicit (or generated) identity."""
        return cls.model_validate(
            {
                "schema_version": "1",
                "thread_id": new_thread_id() if thread_id is None else thread_id,
                "message_history": list(message_history),
                "agent_context_state": agent_context_state or AgentContextStateSnapshot(),
                "environment_states": dict(environment_states or {}),
            }
        )

    def fork(self, *, thread_id: str | None = None) -> HarnessState:
        """Copy the continuation data into a new, independently advancing Thread.

        Environment state is cleared because it describes mounts of the source Thread; retained inline
        children get fresh thread ids so the branch never advances the source's children.
        """
        from ._subagents import rethread_retained_children

        new_id = new_thread_id() if thread_id is None else thread_id
        if new_id == self.thread_id:
            raise ValueError("a fork needs a thread id different from the source thread id")
        return type(self).model_validate(
            {
                **(self.model_extra or {}),
                "schema_version": self.schema_version,
                "thread_id": new_id,
                "message_history": self.message_history,
                "agent_context_state": rethread_retained_children(self.agent_context_state),
                "refs": self.refs,
            }
        )

    def with_changes(
        self,
        *,
        message_history: Sequence[ModelMessage] | None = None,
        agent_context_state: AgentContextStateSnapshot | None = None,
        environment_states: Mapping[str, EnvironmentState] | None = None,
    ) -> HarnessState:
        """A new envelope of the same Thread (same id and extra fields) with the given parts replaced."""
        return type(self).model_validate(
            {
                **(self.model_extra or {}),
                "schema_version": self.schema_version,
                "thread_id": self.thread_id,
                "message_history": self.message_history if message_history is None else list(message_history),
                "agent_context_state": (
                    self.agent_context_state if agent_context_state is None else agent_context_state
                ),
                "environment_states": (
                    self.environment_states if environment_states is None else dict(environment_states)
                ),
                "refs": self.refs,
            }
        )
