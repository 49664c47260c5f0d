"""Agents of runs: the executable a Run uses, rebuilt from its frozen profile snapshot and policy version."""

from __future__ import annotations

from typing import Any

from pydantic_ai import Tool
from pydantic_ai.capabilities import AbstractCapability

from runs.harness import AgentDefinition, ApprovalRule, ExecutableAgent, is_recovery_retryable
from runs.models import AgentProfile, Run

from . import toolbox
from .policy import approval_capability
from .providers import ModelChoice, build_model

__all__ = ("WHAT_IF_REASON", "build_executable", "profile_snapshot", "run_rules", "side_effect_guard")


def profile_snapshot(profile: AgentProfile) -> dict[str, Any]:
    """What a Run freezes of its profile, so later profile edits never change a run under way or recovered."""
    return {
        "name": profile.name,
        "model": profile.model,
        "base_url": profile.base_url,
        "instructions": profile.instructions,
        "enabled_tools": list(profile.enabled_tools or []),
    }


WHAT_IF_REASON = "A what-if fork runs no side effect until an operator approves it (promotes the fork)."


def side_effect_guard(tools: list[Tool[Any]]) -> list[ApprovalRule]:
    """Rules that defer every call of a tool with side effects (one not declared safe to run again) to approval."""
    return [
        ApprovalRule(tool=tool.name, reason=WHAT_IF_REASON)
        for tool in tools
        if not is_recovery_retryable(tool.tool_def)
    ]


def run_rules(run: Run, tools: list[Tool[Any]] | None = None) -> list[ApprovalRule]:
    """The approval rules of the run's own, beside its policy's: a what-if's side-effect guard."""
    if run.execution.what_if is None:
        return []
    return side_effect_guard(toolbox.resolve(run.profile_snapshot.get("enabled_tools", [])) if tools is None else tools)


def build_executable(run: Run, *, extra_capabilities: list[AbstractCapability[Any]]) -> ExecutableAgent[Any]:
    snapshot = run.profile_snapshot
    tools = toolbox.resolve(snapshot.get("enabled_tools", []))
    guard = run_rules(run, tools)
    definition: AgentDefinition[Any] = AgentDefinition(
        name=snapshot["name"],
        model=build_model(ModelChoice(snapshot["model"], snapshot.get("base_url", ""), snapshot["name"])),
        model_settings={"max_retries": run.policy_version.model_max_retries},
        instructions=snapshot.get("instructions") or None,
        tools=tools,
        capabilities=[approval_capability(run.policy_version, also=guard), *extra_capabilities],
    )
    return definition.build()
