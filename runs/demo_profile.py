"""The `demo` agent profile: the offline demo model with every tool the Host offers, created on first use.

The demo commands (`harness_demo`, `harness_run` without `--profile`) run on it. Its model is whatever
`HARNESS_DEMO_MODEL` names; its instructions are the demo agent's (`runs.harness.demo`).
"""

from __future__ import annotations

from runs.harness.demo import INSTRUCTIONS
from runs.models import AgentProfile
from runs.services.store import DEMO_MODEL, toolbox

DEMO_PROFILE = "demo"


def ensure_demo_profile() -> AgentProfile:
    """The offline demo profile (demo model, every Host tool), created on first use."""
    profile, _ = AgentProfile.objects.get_or_create(
        name=DEMO_PROFILE,
        defaults={"model": DEMO_MODEL, "instructions": INSTRUCTIONS, "enabled_tools": toolbox.tool_names()},
    )
    return profile
