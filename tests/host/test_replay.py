"""`harness_replay`: a recorded execution replayed with the current agent definition, no model, no side effects."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from runs.demo_profile import ensure_demo_profile
from runs.models import (
    AgentProfile,
    BundleMode,
    Execution,
    JournalEntry,
    Run,
    TeamRole,
    Thread,
    TimelineEvent,
    ToolDispatch,
)
from runs.services.lifecycle import bundle_export, executions
from tests.support import factories
from tests.support.bundles import drive, ended_tree
from tests.support.replays import profile_without

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


def test_executions_that_waited_for_an_approval_and_a_child_replay_equal(django_user_model):
    approver = factories.member(django_user_model, "approver", ensure_demo_profile().team, TeamRole.APPROVER)
    parent = ended_tree(approver)
    child = Execution.objects.get(parent_request__execution=parent)
    assert parent.runs.count() == 2 and child.runs.count() == 2

    for original in (parent, child):
        code, out = replay(str(original.pk))

        # One run each: the child's answer and the approved deploy come from the recording, nothing waits.
        assert code == 0, out
        copy = Execution.objects.get(replay_of=original)
        assert copy.runs.count() == 1 and copy.replay_divergence is None
        assert not Execution.objects.filter(parent_request__execution=copy).exists()


def test_a_profile_without_the_recorded_tool_diverges_at_that_step():
    original = recorded("look up REC-7")

    code, out = replay(str(original.pk), "--profile", profile_without("lookup_record"))

    assert code == 3, out
    copy = Execution.objects.get(replay_of=original)
    assert copy.replay_divergence["kind"] == "tool"
    assert "a tool named lookup_record" in copy.replay_divergence["expected"]
    assert "has no such tool" in copy.replay_divergence["asked"]
    assert f"diverged at step {copy.replay_divergence['step']} (tool)" in out
    assert copy.status == "failed" and copy.failure_code == "replay_diverged"


def test_the_execution_page_shows_the_replay_and_its_divergence(client, django_user_model):
    original = recorded("look up REC-7")
    AgentProfile.objects.filter(pk=ensure_demo_profile().pk).update(instructions="Answer <b>briefly</b>.")
    assert replay(str(original.pk))[0] == 3
    copy = Execution.objects.get(replay_of=original)
    client.force_login(django_user_model.objects.create_user("viewer", password="pw-viewer-1"))

    page = client.get(reverse("runs:execution", args=[copy.pk])).content.decode()

    assert f"#{original.pk}: recorded" in page and reverse("runs:execution", args=[original.pk]) in page
    assert 'id="replay-divergence"' in page and "at step 1" in page
    assert "Answer &lt;b&gt;briefly&lt;/b&gt;." in page and "<b>briefly</b>" not in page
    recorded_page = client.get(reverse("runs:execution", args=[original.pk])).content.decode()
    assert reverse("runs:execution", args=[copy.pk]) in recorded_page and "diverged at step 1" in recorded_page


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


def test_a_tool_that_no_longer_exists_is_a_divergence_not_a_crash(settings):
    original = recorded("look up REC-7")
    settings.HARNESS_TOOLSETS = ["tests.support.plugin_tools.toolset"]

    code, out = replay(str(original.pk))

    assert code == 3, out
    divergence = Execution.objects.get(replay_of=original).replay_divergence
    assert divergence["kind"] == "tool" and "lookup_record" in divergence["expected"]
    assert divergence["asked"] == "the current agent has no such tool; it offers none"


def counts() -> tuple[int, int, int]:
    return Thread.objects.count(), Execution.objects.count(), JournalEntry.objects.count()


@pytest.mark.parametrize(
    ("spoil", "message"),
    [
        (lambda execution: Execution.objects.filter(pk=execution.pk).update(status="running"), "is running"),
        (
            lambda execution: JournalEntry.objects.filter(run__execution=execution).update(codec_version=99),
            "codec version 99",
        ),
        (
            lambda execution: JournalEntry.objects.filter(
                run__execution=execution, kind__startswith="result."
            ).delete(),
            "has no journaled result",
        ),
    ],
    ids=["running", "newer-codec", "no-journal"],
)
def test_an_execution_that_cannot_be_replayed_is_refused_and_nothing_is_written(spoil, message):
    original = recorded("look up REC-7")
    spoil(original)
    before = counts()

    code, out = replay(str(original.pk))

    assert code == 1 and "Nothing was replayed" in out and message in out, out
    assert counts() == before


def test_all_since_replays_every_completed_execution_and_fails_if_one_diverges():
    looked_up, greeted = recorded("look up REC-7"), recorded("hello there")
    demo = ensure_demo_profile()
    AgentProfile.objects.create(
        name="swapped", team=demo.team, model=demo.model, instructions=demo.instructions, enabled_tools=[]
    )
    since = looked_up.created_at.date().isoformat()

    assert replay("--all", "--since", since)[0] == 0
    code, out = replay("--all", "--since", since, "--profile", "swapped")

    assert code == 3, out
    assert "2 replayed, 1 diverged." in out and "1 of 2 replays diverged." in out
    assert Execution.objects.filter(replay_of=greeted).count() == 2
    # Replays are not replayed again: the second pass saw only the two recordings.
    assert Execution.objects.filter(replay_of__replay_of__isnull=False).count() == 0


def test_a_full_bundle_is_replayed_from_a_temporary_copy(tmp_path):
    original = recorded("look up REC-7 and search for acme")
    path = tmp_path / "recorded.zip"
    with path.open("xb") as target:
        bundle_export.export_bundle(original, target, mode=BundleMode.FULL)
    # Gone from this Host, as if the bundle came from another one.
    Thread.objects.filter(pk=original.thread_id).delete()
    before = counts()

    code, out = replay("--bundle", str(path), "--accept-unsigned")

    assert code == 0, out
    assert ": equal (" in out and "were not kept" in out
    assert counts() == before


def test_a_redacted_bundle_holds_no_recording(tmp_path):
    original = recorded("look up REC-7")
    path = tmp_path / "redacted.zip"
    with path.open("xb") as target:
        bundle_export.export_bundle(original, target, mode=BundleMode.REDACTED)
    Thread.objects.filter(pk=original.thread_id).delete()
    before = counts()

    code, out = replay("--bundle", str(path), "--accept-unsigned")

    assert code == 1 and "no journaled result" in out, out
    assert counts() == before
