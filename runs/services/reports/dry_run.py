"""Dry run of approval rules: which tool calls of recent executions the rules would have stopped.

The calls are read from the journal, the source history: each tool call the model made is a `part_end` item
with a `ToolCallPart` in a root run (inline children are not under the Host's approval policy). The journal
holds the real arguments, so the rules are judged on what the model really sent; the arguments shown are
masked by the redaction of the execution's own policy version, as every other page shows them. Whether a call
asked for approval back then is read from its `DeferredRequest`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic_ai import Tool, ToolCallPart

from runs.harness import ApprovalPolicy, ApprovalRule, HarnessEvent, decode_item
from runs.models import DeferredKind, DeferredRequest, Execution, JournalEntry

from ..timeline.redaction import redactor_for

__all__ = ("CallOutcome", "DryRun", "dry_run")


@dataclass(frozen=True, slots=True)
class CallOutcome:
    """One tool call of a recent execution, as its own policy treated it and as the new rules would."""

    execution: Execution
    tool: str
    tool_call_id: str
    args: Any
    asked_then: bool
    stopped_by: str

    @property
    def args_json(self) -> str:
        return json.dumps(self.args, ensure_ascii=False, sort_keys=True)

    @property
    def stopped_now(self) -> bool:
        return bool(self.stopped_by)

    @property
    def change(self) -> str:
        if self.stopped_now and not self.asked_then:
            return "newly stopped"
        if self.asked_then and not self.stopped_now:
            return "no longer stopped"
        return ""


@dataclass(frozen=True, slots=True)
class DryRun:
    executions: int
    calls: tuple[CallOutcome, ...]

    @property
    def stopped(self) -> int:
        return sum(call.stopped_now for call in self.calls)

    @property
    def changed(self) -> int:
        return sum(bool(call.change) for call in self.calls)

    @property
    def changes(self) -> tuple[CallOutcome, ...]:
        """The calls the rules would decide differently from their own policy: what an admin reads first."""
        return tuple(call for call in self.calls if call.change)

    @property
    def unchanged(self) -> tuple[CallOutcome, ...]:
        return tuple(call for call in self.calls if not call.change)


def _stopped_by(policy: ApprovalPolicy, tool: Tool[Any], args: Mapping[str, Any]) -> str:
    """What would stop the call, or "" when nothing would."""
    if tool.requires_approval:
        return "the tool itself"
    rule = policy.matching_rule(tool.name, args)
    if rule is None:
        return ""
    return f"rule {policy.rules.index(rule) + 1}: {rule.reason_text}"


def dry_run(rules: tuple[ApprovalRule, ...], *, last: int, tools: Mapping[str, Tool[Any]]) -> DryRun:
    """Judge the tool calls of the `last` executions (newest first) by `rules` and the tools' own declarations.

    Calls of tools that are no longer in `tools` are left out: no rule can be checked against them.
    """
    recent = list(Execution.objects.select_related("thread", "policy_version").order_by("-created_at", "-pk")[:last])
    by_pk = {execution.pk: execution for execution in recent}
    asked = set(
        DeferredRequest.objects.filter(execution__in=recent, kind=DeferredKind.APPROVAL).values_list(
            "execution_id", "tool_call_id"
        )
    )
    entries = (
        JournalEntry.objects.filter(run__execution__in=recent, kind="part_end")
        .order_by("-run__execution_id", "run__number", "index")
        .values_list("run__execution_id", "run__run_id", "payload", "codec_version")
    )
    policy = ApprovalPolicy(rules)
    seen: set[tuple[int, str]] = set()
    calls = []
    for execution_pk, run_id, payload, codec_version in entries.iterator():
        item = decode_item(payload, codec_version)
        part = getattr(item.event, "part", None) if isinstance(item, HarnessEvent) else None
        if item.run_id != run_id or not isinstance(part, ToolCallPart) or part.tool_name not in tools:
            continue
        key = (execution_pk, part.tool_call_id)
        if key in seen:  # a recovery run may stream the same call again
            continue
        seen.add(key)
        execution = by_pk[execution_pk]
        args = part.args_as_dict()
        calls.append(
            CallOutcome(
                execution=execution,
                tool=part.tool_name,
                tool_call_id=part.tool_call_id,
                args=redactor_for(execution.policy_version).value(args),
                asked_then=key in asked,
                stopped_by=_stopped_by(policy, tools[part.tool_name], args),
            )
        )
    return DryRun(executions=len(recent), calls=tuple(calls))
