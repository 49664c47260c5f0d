"""`HarnessRunResult`: the outcome of one Harness Run and its candidate continuation state."""

from __future__ import annotations

import copy
import json
from typing import TYPE_CHECKING, Any, Generic, Literal, TypedDict, TypeVar

import pydantic_core
from pydantic import BaseModel, ConfigDict, Field, JsonValue, computed_field
from pydantic_ai import ModelMessage
from pydantic_ai.usage import RunUsage

from ._errors import RetryHint, RunError
from ._state import CanonicalJson, HarnessState

if TYPE_CHECKING:
    from ._deferred import PendingDeferredCalls

__all__ = ("HarnessRunResult", "RunOutcome", "RunUsageSummary", "SafeFailure", "SuspendReason")

OutputT = TypeVar("OutputT")

RunOutcome = Literal["completed", "suspended", "failed", "cancelled"]
SuspendReason = Literal["deferred"]


class FailureDetails(TypedDict, total=False):
    """What the harness itself puts in a failure's details: what failed and how, never a provider's body."""

    error_type: str
    error_message: str
    model_name: str
    status_code: int
    provider_error_code: str
    phase: str


class SafeFailure(BaseModel):
    """What a Host may show about a failure: a stable code and a short message, never a stack trace."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    code: str = Field(min_length=1)
    message: str
    retry_hint: RetryHint = "none"
    details_json: CanonicalJson = Field(default=b"{}", validation_alias="details", exclude=True, repr=False)

    @computed_field  # type: ignore[prop-decorator]  # mypy takes no decorator over a @property
    @property
    def details(self) -> dict[str, JsonValue]:
        details: dict[str, JsonValue] = json.loads(self.details_json)
        return details


class RunUsageSummary(BaseModel):
    """Token and request counts of one run (not cumulative across the Thread)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    requests: int = Field(default=0, ge=0)
    tool_calls: int = Field(default=0, ge=0)
    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    cache_read_tokens: int = Field(default=0, ge=0)
    cache_write_tokens: int = Field(default=0, ge=0)
    reasoning_tokens: int = Field(default=0, ge=0)

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @classmethod
    def from_usage(cls, usage: RunUsage) -> RunUsageSummary:
        return cls(
            requests=usage.requests,
            tool_calls=usage.tool_calls,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cache_read_tokens=usage.cache_read_tokens,
            cache_write_tokens=usage.cache_write_tokens,
            reasoning_tokens=usage.output_reasoning_tokens,
        )


class HarnessRunResult(Generic[OutputT]):
    """The immutable outcome of one run.

    Field combinations follow the status (checked on construction):
    completed: state set, no failure/suspension; suspended: state and deferred requests set, no output;
    failed: failure set, no output/suspension; cancelled: no output, failure or suspension. Getters return
    copies so a caller can never change a result it shares with others.
    """

    __slots__ = (
        "_deferred",
        "_failure",
        "_output",
        "_run_id",
        "_state",
        "_status",
        "_suspend_reason",
        "_thread_id",
        "_usage",
    )

    _thread_id: str
    _run_id: str
    _status: RunOutcome
    _output: OutputT | None
    _state: HarnessState | None
    _failure: SafeFailure | None
    _suspend_reason: SuspendReason | None
    _deferred: PendingDeferredCalls | None
    _usage: RunUsageSummary

    def __init__(
        self,
        *,
        thread_id: str,
        run_id: str,
        status: RunOutcome,
        output: OutputT | None = None,
        state: HarnessState | None = None,
        failure: SafeFailure | None = None,
        suspend_reason: SuspendReason | None = None,
        deferred: PendingDeferredCalls | None = None,
        usage: RunUsageSummary | None = None,
    ) -> None:
        for name, value in (("thread_id", thread_id), ("run_id", run_id)):
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"{name} must be a non-blank string")
        if state is not None:
            if not isinstance(state, HarnessState):
                raise TypeError("state must be a HarnessState")
            if state.thread_id != thread_id:
                raise ValueError("the state belongs to a different thread than the result")
        if failure is not None and not isinstance(failure, SafeFailure):
            raise TypeError("failure must be a SafeFailure")
        _check_combination(status, output, state, failure, suspend_reason, deferred)
        values = {
            "_thread_id": thread_id,
            "_run_id": run_id,
            "_status": status,
            "_output": copy.deepcopy(output),
            "_state": state,
            "_failure": failure,
            "_suspend_reason": suspend_reason,
            "_deferred": copy.deepcopy(deferred),
            "_usage": usage or RunUsageSummary(),
        }
        for slot, held in values.items():
            object.__setattr__(self, slot, held)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable; use replace()")

    @property
    def thread_id(self) -> str:
        return self._thread_id

    @property
    def run_id(self) -> str:
        return self._run_id

    @property
    def status(self) -> RunOutcome:
        return self._status

    @property
    def output(self) -> OutputT | None:
        return copy.deepcopy(self._output)

    @property
    def state(self) -> HarnessState | None:
        # HarnessState is frozen and holds its mutable parts as bytes, so sharing it cannot leak mutations.
        return self._state

    @property
    def failure(self) -> SafeFailure | None:
        return self._failure

    @property
    def suspend_reason(self) -> SuspendReason | None:
        return self._suspend_reason

    @property
    def deferred(self) -> PendingDeferredCalls | None:
        return copy.deepcopy(self._deferred)

    @property
    def usage(self) -> RunUsageSummary:
        return self._usage

    def all_messages(self) -> list[ModelMessage]:
        """The whole history of the candidate state (empty without a state)."""
        return [] if self._state is None else list(self._state.message_history)

    def new_messages(self) -> list[ModelMessage]:
        """The messages this run added to the Thread."""
        return [message for message in self.all_messages() if message.run_id == self._run_id]

    def replace(self, **changes: Any) -> HarnessRunResult[OutputT]:
        """A copy with some fields changed; the combination rules are checked again."""
        fields = self._fields()
        unknown = set(changes) - set(fields)
        if unknown:
            raise TypeError(f"unknown result fields: {sorted(unknown)}")
        return HarnessRunResult(**{**fields, **changes})

    def _fields(self) -> _ResultFields:
        return {
            "thread_id": self._thread_id,
            "run_id": self._run_id,
            "status": self._status,
            "output": self._output,
            "state": self._state,
            "failure": self._failure,
            "suspend_reason": self._suspend_reason,
            "deferred": self._deferred,
            "usage": self._usage,
        }

    def __reduce__(self) -> tuple[Any, ...]:
        # Copies and pickles go through the constructor, so they are checked like any other result.
        return (_restore_result, (self._fields(),))

    def raise_for_status(self) -> None:
        """Raise a `RunError` unless the run completed."""
        if self._status == "failed":
            assert self._failure is not None
            raise RunError(
                self._failure.message,
                code=self._failure.code,
                details=self._failure.details,
                retry_hint=self._failure.retry_hint,
            )
        if self._status == "suspended":
            raise RunError("the run is suspended on deferred tool calls", code="run_suspended", retry_hint="new_run")
        if self._status == "cancelled":
            raise RunError("the run was cancelled", code="run_cancelled", retry_hint="new_run")

    def output_or_raise(self) -> OutputT:
        self.raise_for_status()
        # Completed, so the output is set; None only when OutputT itself allows it.
        return self.output  # type: ignore[return-value]

    def output_json(self) -> bytes:
        return pydantic_core.to_json(self._output)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, HarnessRunResult):
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in self.__slots__)

    # Unhashable, since equality compares values; typeshed declares `__hash__` a method only.
    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"HarnessRunResult(status={self._status!r}, thread_id={self._thread_id!r}, "
            f"run_id={self._run_id!r}, output={self._output!r}, failure={self._failure!r})"
        )


class _ResultFields(TypedDict):
    """A result's constructor arguments, as `replace()` and pickling pass them on."""

    thread_id: str
    run_id: str
    status: RunOutcome
    output: Any
    state: HarnessState | None
    failure: SafeFailure | None
    suspend_reason: SuspendReason | None
    deferred: PendingDeferredCalls | None
    usage: RunUsageSummary


def _restore_result(fields: _ResultFields) -> HarnessRunResult[Any]:
    return HarnessRunResult(**fields)


def _check_combination(
    status: str,
    output: object,
    state: HarnessState | None,
    failure: SafeFailure | None,
    suspend_reason: SuspendReason | None,
    deferred: object,
) -> None:
    problems: list[str] = []
    if status == "completed":
        if state is None:
            problems.append("a completed result needs a state")
        if failure is not None or suspend_reason is not None or deferred is not None:
            problems.append("a completed result has no failure, suspension or deferred requests")
    elif status == "suspended":
        if state is None:
            problems.append("a suspended result needs a state")
        if output is not None or failure is not None:
            problems.append("a suspended result has no output or failure")
        if suspend_reason != "deferred" or deferred is None:
            problems.append('a suspended result needs suspend_reason="deferred" and deferred requests')
    elif status == "failed":
        if failure is None:
            problems.append("a failed result needs a failure")
        if output is not None or suspend_reason is not None or deferred is not None:
            problems.append("a failed result has no output, suspension or deferred requests")
    elif status == "cancelled":
        if output is not None or failure is not None or suspend_reason is not None or deferred is not None:
            problems.append("a cancelled result has no output, failure, suspension or deferred requests")
    else:
        problems.append(f"unknown status {status!r}")
    if problems:
        raise ValueError("; ".join(problems))
