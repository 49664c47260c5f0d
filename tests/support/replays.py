"""Replays in tests: a profile of the demo's that lost a tool, and a recorded execution replayed by one."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from runs.demo_profile import ensure_demo_profile
from runs.models import AgentProfile, Execution, ExecutionStatus
from runs.services.lifecycle import executions
from tests.support.bundles import drive
from tests.support.services import wait_until


def profile_without(tool: str, name: str = "swapped") -> str:
    """A profile like the demo's, in its team, without `tool`; its name, for `harness_replay --profile`."""
    demo = ensure_demo_profile()
    AgentProfile.objects.create(
        name=name,
        team=demo.team,
        model=demo.model,
        instructions=demo.instructions,
        enabled_tools=[enabled for enabled in demo.enabled_tools if enabled != tool],
    )
    return name


def record_and_replay() -> Execution:
    """A recorded lookup replayed by a profile that lost `lookup_record`; the replay's execution.

    Run it in a thread of its own beside a browser: the runner drives its own event loop, and Playwright's already
    runs in the test's thread.
    """
    try:
        profile = ensure_demo_profile()
        original = executions.start_execution(executions.create_thread(profile, title="recorded"), "look up REC-7")
        # The live stack's worker may take the run before this process does: either way, wait for its end.
        drive(original)
        wait_until(
            lambda: Execution.objects.get(pk=original.pk).status == ExecutionStatus.COMPLETED,
            timeout=60,
            what="the recorded execution's end",
        )
        AgentProfile.objects.filter(pk=profile.pk).update(enabled_tools=["search_records"])
        with pytest.raises(CommandError) as refused:
            call_command("harness_replay", str(original.pk))
        assert refused.value.returncode == 3
        return Execution.objects.select_related("replay_of").get(replay_of=original)
    finally:
        connection.close()
