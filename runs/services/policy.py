"""Host policy applied to runs: approval rules as a pydantic-ai capability, expiry, versions.

A `HostPolicyVersion` row is immutable; everything here reads one version and turns it into values the
execution machinery hands to the agent (`approval_capability`); its redaction patterns are applied by
`runs.services.redaction`. Editing a policy never changes a version in place: `publish_policy_version`
writes the next one, so a Run keeps the rules it started with.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import re
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Literal

from django.db import transaction
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError
from pydantic_ai import ApprovalRequired, RunContext, ToolCallPart, ToolDefinition
from pydantic_ai.capabilities import AbstractCapability

from runs.harness import tool_call_approved
from runs.models import POLICY_VERSION_LIMITS, HostPolicy, HostPolicyVersion

APPROVAL_CAPABILITY_ID = "host.approval_policy"
DEFAULT_REASON = "Host policy requires approval for this tool."
TOOL_OWN_REASON = "The tool itself asks for approval."


class ArgumentCondition(BaseModel):
    """A simple test on one top-level argument of a tool call."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    arg: str = Field(min_length=1)
    op: Literal["eq", "ne", "gt", "lt", "contains"]
    value: Any = None

    def holds(self, args: Mapping[str, Any]) -> bool:
        """Whether the condition matches. It fails closed: an argument that is missing or cannot be
        compared with the rule's value counts as a match, so an unclear call still asks for approval."""
        if self.arg not in args:
            return True
        actual = args[self.arg]
        try:
            match self.op:
                case "eq":
                    return actual == self.value
                case "ne":
                    return actual != self.value
                case "gt":
                    return actual > self.value
                case "lt":
                    return actual < self.value
                case "contains":
                    return self.value in actual
        except TypeError:
            return True
        raise AssertionError(self.op)  # Literal above keeps this unreachable


class ApprovalRule(BaseModel):
    """`tool` is a tool name or an fnmatch glob; without `when` every call of a matching tool needs approval."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tool: str = Field(min_length=1)
    when: ArgumentCondition | None = None
    reason: str = ""

    def matches_tool(self, tool_name: str) -> bool:
        return fnmatch.fnmatchcase(tool_name, self.tool)

    def matches_call(self, tool_name: str, args: Mapping[str, Any]) -> bool:
        return self.matches_tool(tool_name) and (self.when is None or self.when.holds(args))

    @property
    def reason_text(self) -> str:
        return self.reason or DEFAULT_REASON


_RULES_ADAPTER = TypeAdapter(tuple[ApprovalRule, ...])


def parse_approval_rules(value: Any) -> tuple[ApprovalRule, ...]:
    """Validate the JSON stored in `HostPolicyVersion.approval_rules`; `ValueError` with a readable message."""
    try:
        rules = _RULES_ADAPTER.validate_python(value or ())
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or 'rules'}: {error['msg']}" for error in exc.errors()
        )
        raise ValueError(f"Invalid approval rules: {problems}") from exc
    try:
        # Python's JSON reads NaN and Infinity, which the database's JSON check (rightly) refuses.
        json.dumps(value, allow_nan=False)
    except ValueError as exc:
        raise ValueError("Invalid approval rules: numbers must be finite (no NaN or Infinity).") from exc
    return rules


def check_limits(values: Mapping[str, Any]) -> None:
    """Refuse numbers outside `POLICY_VERSION_LIMITS` with a readable `ValueError` (the table refuses them too)."""
    for name, (low, high) in POLICY_VERSION_LIMITS.items():
        if name in values and not (isinstance(values[name], int) and low <= values[name] <= high):
            raise ValueError(f"{name} must be a whole number from {low} to {high}, not {values[name]!r}.")


def parse_redact_patterns(value: Any) -> tuple[re.Pattern[str], ...]:
    """Compile the key regexes of `HostPolicyVersion.redact_patterns` (case-insensitive search)."""
    if not isinstance(value, list | tuple) or not all(isinstance(item, str) and item for item in value):
        raise ValueError("Redaction patterns must be a list of non-empty regular expressions.")
    compiled = []
    for pattern in value:
        try:
            compiled.append(re.compile(pattern, re.IGNORECASE))
        except re.error as exc:
            raise ValueError(f"Invalid redaction pattern {pattern!r}: {exc}") from exc
    return tuple(compiled)


@dataclasses.dataclass(frozen=True)
class ApprovalPolicy:
    rules: tuple[ApprovalRule, ...] = ()

    def always_requires(self, tool_name: str) -> ApprovalRule | None:
        """The first unconditional rule for the tool: its definitions are turned into `kind="unapproved"`."""
        return next((rule for rule in self.rules if rule.when is None and rule.matches_tool(tool_name)), None)

    def conditional_match(self, tool_name: str, args: Mapping[str, Any]) -> ApprovalRule | None:
        return next((rule for rule in self.rules if rule.when is not None and rule.matches_call(tool_name, args)), None)

    def matching_rule(self, tool_name: str, args: Mapping[str, Any]) -> ApprovalRule | None:
        return next((rule for rule in self.rules if rule.matches_call(tool_name, args)), None)


def approval_policy(version: HostPolicyVersion | None) -> ApprovalPolicy:
    return ApprovalPolicy(parse_approval_rules(version.approval_rules) if version is not None else ())


@dataclasses.dataclass
class HostApprovalCapability(AbstractCapability[Any]):
    """Makes the policy's tools approval-required in every step of a run.

    Unconditional rules mark the tool definitions `kind="unapproved"`, which is pydantic-ai's own
    approval path. Argument conditions can only be judged once the call's arguments are validated, so they
    raise `ApprovalRequired` from `after_tool_validate` unless a person approved this very call; a recovery
    replay (which pydantic-ai also reports as approved) asks again, since an approval is never replay
    permission. On a resume the rules are those of the resuming Run's policy version.
    """

    policy: ApprovalPolicy = dataclasses.field(default_factory=ApprovalPolicy)
    id: str = APPROVAL_CAPABILITY_ID

    async def prepare_tools(self, ctx: RunContext[Any], tool_defs: list[ToolDefinition]) -> list[ToolDefinition]:
        return [
            dataclasses.replace(tool_def, kind="unapproved")
            if tool_def.kind == "function" and self.policy.always_requires(tool_def.name)
            else tool_def
            for tool_def in tool_defs
        ]

    async def after_tool_validate(
        self, ctx: RunContext[Any], *, call: ToolCallPart, tool_def: ToolDefinition, args: Any
    ) -> Any:
        if (
            not tool_call_approved(ctx)
            and tool_def.kind == "function"
            and isinstance(args, Mapping)
            and self.policy.conditional_match(tool_def.name, args)
        ):
            raise ApprovalRequired()
        return args


def approval_capability(version: HostPolicyVersion | None) -> HostApprovalCapability:
    return HostApprovalCapability(policy=approval_policy(version))


def approval_reason(version: HostPolicyVersion | None, tool_name: str, args: Mapping[str, Any] | None) -> str:
    """Why a deferred approval was asked for: the reason of the first rule matching this call."""
    rule = approval_policy(version).matching_rule(tool_name, args or {})
    return rule.reason_text if rule is not None else TOOL_OWN_REASON


def expiry_for(version: HostPolicyVersion | None, created_at: datetime) -> datetime | None:
    """When an unanswered request set is answered with denials; `None` when the policy never expires them."""
    seconds = version.approval_timeout_seconds if version is not None else 0
    return created_at + timedelta(seconds=seconds) if seconds and seconds > 0 else None


POLICY_VERSION_FIELDS: Sequence[str] = (
    "approval_rules",
    "tool_recovery",
    "max_attempts",
    "lease_seconds",
    "approval_timeout_seconds",
    "redact_patterns",
    "model_max_retries",
)


def publish_policy_version(
    policy: HostPolicy, *, created_by: Any, comment: str = "", **values: Any
) -> HostPolicyVersion:
    """Write the next immutable version of `policy` and make it current.

    Fields not given are carried over from the current version. The policy row is locked so two admins
    saving at once get consecutive numbers instead of a unique-constraint error.
    """
    unknown = set(values) - set(POLICY_VERSION_FIELDS)
    if unknown:
        raise TypeError(f"Not policy version fields: {sorted(unknown)}")
    parse_approval_rules(values.get("approval_rules"))
    check_limits(values)
    if "redact_patterns" in values:
        parse_redact_patterns(values["redact_patterns"])
    with transaction.atomic():
        locked = HostPolicy.objects.select_for_update().get(pk=policy.pk)
        current = locked.current_version
        carried = {name: getattr(current, name) for name in POLICY_VERSION_FIELDS} if current else {}
        last = HostPolicyVersion.objects.filter(policy=locked).order_by("-number").first()
        version = HostPolicyVersion.objects.create(
            policy=locked,
            number=(last.number if last else 0) + 1,
            created_by=created_by,
            comment=comment,
            **{**carried, **values},
        )
        locked.current_version = version
        locked.save(update_fields=["current_version"])
    policy.current_version = version
    return version
