"""A second team for trying the separation in a browser (`harness_demo`): team `research` with its own demo
profile, and a user `viewer` / `viewer` who is a viewer of that team only, so it sees none of `default`'s work.
Like the demo operator, the user is created only when missing and never changed afterwards."""

from __future__ import annotations

from django.contrib.auth import get_user_model

from runs.harness.demo import INSTRUCTIONS
from runs.models import AgentProfile, Membership, Team, TeamRole
from runs.services.store import DEMO_MODEL, toolbox

DEMO_TEAM = "research"
DEMO_TEAM_PROFILE = "research-demo"
VIEWER_USERNAME = "viewer"
VIEWER_PASSWORD = "viewer"


def ensure_demo_team() -> AgentProfile:
    """The second team's profile, creating the team, the profile and its viewer when missing."""
    team, _ = Team.objects.get_or_create(name=DEMO_TEAM)
    profile, _ = AgentProfile.objects.get_or_create(
        name=DEMO_TEAM_PROFILE,
        defaults={
            "team": team,
            "model": DEMO_MODEL,
            "instructions": INSTRUCTIONS,
            "enabled_tools": toolbox.tool_names(),
        },
    )
    user, created = get_user_model().objects.get_or_create(username=VIEWER_USERNAME)
    if created:
        user.set_password(VIEWER_PASSWORD)
        user.save(update_fields=["password"])
        Membership.objects.create(user=user, team=team, role=TeamRole.VIEWER)
    return profile
