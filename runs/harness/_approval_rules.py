"""Approval rules: which tool calls need a person's approval, as a pydantic-ai capability.

A rule names a tool (or an fnmatch glob) and optionally one condition on a top-level argument. Unconditional
rules use pydantic-ai's own approval path (`kind="unapproved"`); conditional ones are judged once the call's
arguments are validated. A Host keeps the rules in its policy versions and hands them to each run.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError
from pydantic_ai import ApprovalRequired, RunContext, ToolCallPart, ToolDefinition
from pydantic_ai.capabilities import AbstractCapability

from ._recovery import tool_call_approved

__all__ = (
    "APPROVAL_CAPABILITY_ID",
    "ApprovalPolicy",
    "ApprovalRule",
    "ApprovalRulesCapability",
    "ArgumentCondition",
    "parse_approval_rules",
)

APPROVAL_CAPABILITY_ID = "host.approval_policy"


DEFAULT_REASON = "Host policy requires approval for this tool."


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
                    return bool(actual == self.value)
                case "ne":
                    return bool(actual != self.value)
                case "gt":
                    return bool(actual > self.value)
                case "lt":
                    return bool(actual < self.value)
                case "contains":
                    return bool(self.value in actual)
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
    """Validate rules given as JSON (as a Host stores them); `ValueError` with a readable message."""
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


@dataclasses.dataclass
class ApprovalRulesCapability(AbstractCapability[Any]):
    """Makes the policy's tools approval-required in every step of a run.

    Unconditional rules mark the tool definitions `kind="unapproved"`, which is pydantic-ai's own
    approval path. Argument conditions can only be judged once the call's arguments are validated, so they
    raise `ApprovalRequired` from `after_tool_validate` unless a person approved this very call; a recovery
    replay (which pydantic-ai also reports as approved) asks again, since an approval is never replay
    permission. On a resume the Host passes the rules of the resuming run.
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
