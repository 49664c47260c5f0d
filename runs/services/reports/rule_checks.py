"""Approval rules read against a tool registry: what is wrong with them, and what they require of each tool.

`parse_approval_rules` (policy.py) checks a rule's shape; this module checks its meaning against the tools a
Host really has. A rule naming a tool that does not exist, or an argument the tool does not take, would be saved
silently and never stop anything (or, since a condition on a missing argument fails closed, stop every call), so
both are errors. `effective_approvals` lists per tool what asks for approval: the tool's own declaration
(`Tool(requires_approval=True)`) and each rule that matches it.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic_ai import Tool

from runs.harness import ApprovalRule, ArgumentCondition

from ..store.policy import TOOL_OWN_REASON

__all__ = ("Requirement", "ToolApprovals", "effective_approvals", "problems_of_rule", "rule_problems")

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}
_ORDERED_TYPES = {"string", "integer", "number"}


def _types(schema: Mapping[str, Any]) -> set[str] | None:
    """The JSON types a schema allows, or `None` when it does not say (anyOf, $ref, no type)."""
    declared = schema.get("type")
    if isinstance(declared, str):
        return {declared}
    if isinstance(declared, list):
        return set(declared)
    return None


def _fits(value: Any, schema: Mapping[str, Any]) -> bool:
    types = _types(schema)
    if types is None:
        return True
    if isinstance(value, bool):  # a bool is an int to Python, never to JSON Schema
        return "boolean" in types
    return any(isinstance(value, _JSON_TYPES.get(name, ())) for name in types)


def _condition_problem(condition: ArgumentCondition, schema: Mapping[str, Any]) -> str | None:
    """Why the condition can never be judged on this argument (its result would always fail closed)."""
    types = _types(schema)
    if types is None:
        return None
    if condition.op == "contains":
        if "string" in types:
            return None if isinstance(condition.value, str) else "“contains” on a text argument needs a text value"
        if "array" in types:
            items = schema.get("items")
            fits = _fits(condition.value, items) if isinstance(items, Mapping) else True
            return None if fits else "the value does not fit the list's items"
        return "“contains” needs a text or list argument"
    if condition.op in ("gt", "lt") and not types & _ORDERED_TYPES:
        return f"“{condition.op}” needs a number or text argument"
    if not _fits(condition.value, schema):
        return f"the value {json.dumps(condition.value)} is not of the argument's type ({', '.join(sorted(types))})"
    return None


def problems_of_rule(rule: ApprovalRule, tools: Mapping[str, Tool[Any]]) -> list[str]:
    matched = sorted(name for name in tools if rule.matches_tool(name))
    if not matched:
        if any(char in rule.tool for char in "*?["):
            return [f"the pattern “{rule.tool}” matches no host tool"]
        guess = difflib.get_close_matches(rule.tool, list(tools), n=1)
        return [f"no host tool is called “{rule.tool}”" + (f" (did you mean {guess[0]}?)" if guess else "")]
    if rule.when is None:
        return []
    problems = []
    for name in matched:
        properties = tools[name].tool_def.parameters_json_schema.get("properties", {})
        if rule.when.arg not in properties:
            known = ", ".join(sorted(properties)) or "none"
            problems.append(f"{name} has no argument “{rule.when.arg}” (its arguments: {known})")
            continue
        problem = _condition_problem(rule.when, properties[rule.when.arg])
        if problem:
            problems.append(f"{name}.{rule.when.arg}: {problem}")
    return problems


def rule_problems(rules: tuple[ApprovalRule, ...], tools: Mapping[str, Tool[Any]]) -> list[str]:
    """Every mistake of parsed rules against `tools`, as `rule N (tool): problem` lines; empty when sound."""
    return [
        f"rule {number} ({rule.tool}): {problem}"
        for number, rule in enumerate(rules, start=1)
        for problem in problems_of_rule(rule, tools)
    ]


@dataclass(frozen=True, slots=True)
class Requirement:
    """One reason a tool's calls ask for approval: who says so, for which calls, and why."""

    source: str
    calls: str
    reason: str


@dataclass(frozen=True, slots=True)
class ToolApprovals:
    tool: str
    requirements: tuple[Requirement, ...]

    @property
    def always(self) -> bool:
        return any(requirement.calls == "every call" for requirement in self.requirements)


def _calls(rule: ApprovalRule) -> str:
    if rule.when is None:
        return "every call"
    return f"calls where {rule.when.arg} {rule.when.op} {json.dumps(rule.when.value)}"


def effective_approvals(rules: tuple[ApprovalRule, ...], tools: Mapping[str, Tool[Any]]) -> list[ToolApprovals]:
    """What asks for approval, per tool of `tools` (sorted by name): the tool itself first, then the rules."""
    effective = []
    for name in sorted(tools):
        requirements = []
        if tools[name].requires_approval:
            requirements.append(Requirement("the tool itself", "every call", TOOL_OWN_REASON))
        requirements += [
            Requirement(f"rule {number}", _calls(rule), rule.reason_text)
            for number, rule in enumerate(rules, start=1)
            if rule.matches_tool(name)
        ]
        effective.append(ToolApprovals(name, tuple(requirements)))
    return effective
