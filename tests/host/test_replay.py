"""`harness_replay`: a recorded execution replayed with the current agent definition, no model, no side effects."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from runs.demo_profile import ensure_demo_profile
from runs.models import AgentProfile, Execution, JournalEntry, Run, TimelineEvent, ToolDispatch
from runs.services.lifecycle import executions
from tests.support.bundles import drive

pytestmark = pytest.mark.django_db


def recorded(prompt: str) -> Execution:
    execution = executions.start_execution(executions.create_thread(ensure_demo_profile(), title="recorded"), prompt)
    drive(execution)
    execution.refresh_from_db()
    assert execution.status == "completed", execution.failure_message
    return execution


def replay(*args: str) -> tuple[int, str]:
    """The command's exit code and output."""
    out = io.StringIO()
    try:
        call_command("harness_replay", *args, stdout=out)
    except CommandError as exc:
        return exc.returncode, f"{out.getvalue()}{exc}"
    return 0, out.getvalue()


def test_a_replay_of_an_unchanged_agent_equals_its_original():
    original = recorded("look up REC-7 and search for acme")
    dispatched = ToolDispatch.objects.count()

    code, out = replay(str(original.pk))

    assert code == 0, out
    copy = Execution.objects.get(replay_of=original)
    assert f"replay #{copy.pk} of #{original.pk}: equal" in out
    assert copy.status == "completed" and copy.replay_divergence is None
    assert copy.thread != original.thread and copy.thread.team == original.thread.team
    run = Run.objects.get(execution=copy)
    assert run.output == Run.objects.filter(execution=original).order_by("number").last().output
    assert JournalEntry.objects.filter(run=run).exists() and TimelineEvent.objects.filter(run=run).exists()
    # The same tool calls, answered from the recording: the dispatch ledger shows them, nothing else ran.
    names = sorted(ToolDispatch.objects.filter(run=run).values_list("tool_name", flat=True))
    assert names == sorted(ToolDispatch.objects.filter(run__execution=original).values_list("tool_name", flat=True))
    assert ToolDispatch.objects.count() == dispatched + len(names)


def test_a_profile_without_the_recorded_tool_diverges_at_that_step():
    original = recorded("look up REC-7")
    demo = ensure_demo_profile()
    AgentProfile.objects.create(
        name="swapped",
        team=demo.team,
        model=demo.model,
        instructions=demo.instructions,
        enabled_tools=[name for name in demo.enabled_tools if name != "lookup_record"],
    )

    code, out = replay(str(original.pk), "--profile", "swapped")

    assert code == 3, out
    copy = Execution.objects.get(replay_of=original)
    assert copy.replay_divergence["kind"] == "tool"
    assert "a tool named lookup_record" in copy.replay_divergence["expected"]
    assert "has no such tool" in copy.replay_divergence["asked"]
    assert f"diverged at step {copy.replay_divergence['step']} (tool)" in out
    assert copy.status == "failed" and copy.failure_code == "replay_diverged"


def test_a_tool_whose_arguments_changed_diverges_on_the_next_request(settings):
    original = recorded("look up REC-7")
    settings.HARNESS_TOOLSETS = ["tests.support.replay_tools.toolset"]

    code, out = replay(str(original.pk))

    assert code == 3, out
    divergence = Execution.objects.get(replay_of=original).replay_divergence
    assert divergence["kind"] == "request"
    assert divergence["expected"].startswith("result of lookup_record")
    # The current code refused the recorded arguments: its answer names the field it now wants.
    assert divergence["asked"].startswith("result of lookup_record") and '"loc": ["record"]' in divergence["asked"]


def test_changed_instructions_diverge_at_the_first_request():
    original = recorded("hello there")
    AgentProfile.objects.filter(pk=ensure_demo_profile().pk).update(instructions="Be terse.")

    code, out = replay(str(original.pk))

    assert code == 3, out
    divergence = Execution.objects.get(replay_of=original).replay_divergence
    assert divergence["step"] == 1 and divergence["kind"] == "request"
    assert "Be terse." in divergence["asked"]
