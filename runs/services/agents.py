"""Agents of runs: the executable a Run uses, rebuilt from its frozen profile snapshot and policy version."""

from __future__ import annotations

from typing import Any

from pydantic_ai.capabilities import AbstractCapability

from runs.harness import AgentDefinition, ExecutableAgent
from runs.harness.demo import INSTRUCTIONS
from runs.models import AgentProfile, Run

from . import toolbox
from .policy import approval_capability
from .providers import DEMO_MODEL, ModelChoice, build_model

__all__ = ("DEMO_MODEL", "DEMO_PROFILE", "build_executable", "ensure_demo_profile", "profile_snapshot")

DEMO_PROFILE = "demo"


def ensure_demo_profile() -> AgentProfile:
    """The offline demo profile (scripted model, every demo tool), created on first use."""
    profile, _ = AgentProfile.objects.get_or_create(
        name=DEMO_PROFILE,
        defaults={"model": DEMO_MODEL, "instructions": INSTRUCTIONS, "enabled_tools": toolbox.tool_names()},
    )
    return profile


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
        model=build_model(ModelChoice(snapshot["model"], snapshot.get("base_url", ""))),
        model_settings={"max_retries": run.policy_version.model_max_retries},
        instructions=snapshot.get("instructions") or None,
        tools=toolbox.resolve(snapshot.get("enabled_tools", [])),
        capabilities=[approval_capability(run.policy_version), *extra_capabilities],
    )
    return definition.build()
