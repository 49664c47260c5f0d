"""Agents of runs: the executable a Run uses, rebuilt from its frozen profile snapshot and policy version."""

from __future__ import annotations

from typing import Any

from pydantic_ai.capabilities import AbstractCapability

from runs.harness import AgentDefinition, ExecutableAgent
from runs.models import AgentProfile, Run

from . import toolbox
from .policy import approval_capability
from .providers import ModelChoice, build_model

__all__ = ("build_executable", "profile_snapshot")


def profile_snapshot(profile: AgentProfile) -> dict[str, Any]:
    """What a Run freezes of its profile, so later profile edits never change a run under way or recovered."""
    return {
        "name": profile.name,
        "model": profile.model,
        "base_url": profile.base_url,
        "instructions": profile.instructions,
        "enabled_tools": list(profile.enabled_tools or []),
    }


def build_executable(run: Run, *, extra_capabilities: list[AbstractCapability[Any]]) -> ExecutableAgent[Any]:
    snapshot = run.profile_snapshot
    definition: AgentDefinition[Any] = AgentDefinition(
        name=snapshot["name"],
        model=build_model(ModelChoice(snapshot["model"], snapshot.get("base_url", ""), snapshot["name"])),
        model_settings={"max_retries": run.policy_version.model_max_retries},
        instructions=snapshot.get("instructions") or None,
        tools=toolbox.resolve(snapshot.get("enabled_tools", [])),
        capabilities=[approval_capability(run.policy_version), *extra_capabilities],
    )
    return definition.build()
