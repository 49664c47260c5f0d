"""What a what-if fork changes: exactly one thing, as one typed value stored on the fork's execution.

`parse_change` turns what an operator sent (a form's fields, a stored JSON object) into one of the frozen change
models; anything else (an unknown kind, a field of another kind, a second change) is a `WhatIfRefused` with a
message meant for the operator. Checks against the checkpoint and the Host (the tool's schema, the model, the
policy version) are the lifecycle's (`runs.services.lifecycle.what_if`); this module holds only the values and
what they do to a run's frozen profile.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, TypeAdapter, ValidationError

from runs.models import Execution

from .providers import ModelChoice

__all__ = (
    "ApprovalChange",
    "ArgumentsChange",
    "InstructionsChange",
    "ModelChange",
    "PolicyVersionChange",
    "ToolResultChange",
    "WhatIfChange",
    "WhatIfRefused",
    "applied_to_snapshot",
    "describe",
    "model_choice",
    "parse_change",
    "stored_change",
)


class WhatIfRefused(ValueError):
    """A what-if that cannot be made as asked; nothing was written. `message` is meant for the operator."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class _Change(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ToolResultChange(_Change):
    """The result a call already returned at the checkpoint, replaced before the model reads it."""

    kind: Literal["tool_result"] = "tool_result"
    tool_call_id: str = Field(min_length=1, max_length=200)
    result: JsonValue

    def describe(self) -> str:
        return f"result of call {self.tool_call_id} changed"


class ApprovalChange(_Change):
    """The other verdict on a call the checkpoint's suspension asked approval for."""

    kind: Literal["approval"] = "approval"
    tool_call_id: str = Field(min_length=1, max_length=200)
    verdict: Literal["approve", "deny"]
    message: str = Field(default="", max_length=2000)

    def describe(self) -> str:
        return f"call {self.tool_call_id} {'approved' if self.verdict == 'approve' else 'denied'}"


class ArgumentsChange(_Change):
    """Edited arguments of a deferred call (one awaiting approval at the checkpoint)."""

    kind: Literal["arguments"] = "arguments"
    tool_call_id: str = Field(min_length=1, max_length=200)
    args: dict[str, JsonValue]

    def describe(self) -> str:
        return f"arguments of call {self.tool_call_id} edited"


class InstructionsChange(_Change):
    kind: Literal["instructions"] = "instructions"
    instructions: str = Field(max_length=20000)

    def describe(self) -> str:
        return "instructions changed"


class ModelChange(_Change):
    kind: Literal["model"] = "model"
    model: str = Field(min_length=1, max_length=200)

    def describe(self) -> str:
        return f"model changed to {self.model}"


class PolicyVersionChange(_Change):
    """Another version (by number) of the team's policy."""

    kind: Literal["policy_version"] = "policy_version"
    number: int = Field(ge=1)

    def describe(self) -> str:
        return f"policy version {self.number}"


WhatIfChange = Annotated[
    ToolResultChange | ApprovalChange | ArgumentsChange | InstructionsChange | ModelChange | PolicyVersionChange,
    Field(discriminator="kind"),
]
_ADAPTER: TypeAdapter[WhatIfChange] = TypeAdapter(WhatIfChange)
# The fields only one kind has: a value sent for a kind's field that is not the chosen kind is a second change.
_OWN_FIELDS = {
    "tool_result": ("result",),
    "approval": ("verdict", "message"),
    "arguments": ("args",),
    "instructions": ("instructions",),
    "model": ("model",),
    "policy_version": ("number",),
}


def parse_change(data: Mapping[str, Any]) -> WhatIfChange:
    """The one change `data` describes; `WhatIfRefused` names what is wrong (a second change included)."""
    kind = data.get("kind")
    if kind not in _OWN_FIELDS:
        raise WhatIfRefused(f"Choose what the what-if changes: one of {', '.join(_OWN_FIELDS)}.")
    others = sorted(
        other for other, fields in _OWN_FIELDS.items() if other != kind and any(field in data for field in fields)
    )
    if others:
        raise WhatIfRefused(
            f"A what-if changes exactly one thing; this one also changes: {', '.join(others)}. Make one fork each."
        )
    try:
        # The database's JSON refuses what Python's reads beyond JSON (NaN, Infinity).
        json.dumps(dict(data), allow_nan=False)
    except (TypeError, ValueError):
        raise WhatIfRefused(f"The {kind} change holds a value that is not JSON (NaN, Infinity or an object).") from None
    try:
        return _ADAPTER.validate_python(dict(data))
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc'][1:]) or kind}: {error['msg']}" for error in exc.errors()
        )
        raise WhatIfRefused(f"The {kind} change is not valid: {problems}.") from None


def stored_change(value: Mapping[str, Any]) -> WhatIfChange:
    """A change as stored on an execution (`Execution.what_if`), read back."""
    return _ADAPTER.validate_python(dict(value))


def describe(execution: Execution) -> str:
    """What a what-if fork changed, as pages and the audit say it ("what-if of #N: instructions changed"); empty
    for an execution that is none."""
    if execution.what_if is None:
        return ""
    # Retention may have purged the original since (the link is then null).
    original = f"#{execution.what_if_of_id}" if execution.what_if_of_id is not None else "a purged execution"
    return f"what-if of {original}: {stored_change(execution.what_if).describe()}"


def applied_to_snapshot(snapshot: Mapping[str, Any], change: Mapping[str, Any] | None) -> dict[str, Any]:
    """A run's frozen profile with the what-if's instructions or model, if that is what it changes."""
    result = dict(snapshot)
    if change is None:
        return result
    parsed = stored_change(change)
    if isinstance(parsed, InstructionsChange):
        result["instructions"] = parsed.instructions
    elif isinstance(parsed, ModelChange):
        choice = model_choice(parsed, result.get("base_url", ""), result.get("name", ""))
        result["model"], result["base_url"] = choice.model, choice.base_url
    return result


def model_choice(change: ModelChange, base_url: str, profile: str) -> ModelChoice:
    """The model a what-if runs: on the profile's server when its provider takes one (another model there), else
    on the provider's own."""
    spec = ModelChoice(change.model).spec
    return ModelChoice(change.model, base_url if spec is not None and spec.accepts_base_url else "", profile)
