"""Agents of runs: the executable a Run uses, rebuilt from its frozen profile snapshot and policy version."""

from __future__ import annotations

from typing import Any

from pydantic_ai.capabilities import AbstractCapability

from runs.harness.agent import AgentDefinition, ExecutableAgent
from runs.models import AgentProfile, Run

from . import toolbox
from .policy import approval_capability

__all__ = ("DEMO_MODEL", "build_executable", "profile_snapshot")

DEMO_MODEL = "demo"


def profile_snapshot(profile: AgentProfile) -> dict[str, Any]:
    """What a Run freezes of its profile, so later profile edits never change a run under way or recovered."""
    return {
        "name": profile.name,
        "model": profile.model,
        "instructions": profile.instructions,
        "enabled_tools": list(profile.enabled_tools or []),
    }


def build_executable(run: Run, *, extra_capabilities: list[AbstractCapability[Any]]) -> ExecutableAgent[Any]:
    snapshot = run.profile_snapshot
    model: Any = snapshot["model"]
    if model == DEMO_MODEL:
        from runs.harness.demo import demo_model

        model = demo_model()
    definition: AgentDefinition[Any] = AgentDefinition(
        name=snapshot["name"],
        model=model,
        instructions=snapshot.get("instructions") or None,
        tools=toolbox.resolve(snapshot.get("enabled_tools", [])),
        capabilities=[approval_capability(run.policy_version), *extra_capabilities],
    )
    return definition.build()
