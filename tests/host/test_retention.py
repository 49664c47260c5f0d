"""Retention (issue #32): the policy's `retention_days`, the chunked purge pass with its tombstones, holds, the dry
run, and the pages of a purged execution. Demo runs execute in this process (`execute_run`), so the journal,
timeline and checkpoints purged are the ones real runs write."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import IntegrityError, transaction
from django.db.models import Sum, TextField
from django.db.models.functions import Cast, Length
from django.urls import reverse
from django.utils import timezone

from runs.demo_profile import ensure_demo_profile
from runs.models import (
    Checkpoint,
    Decision,
    Execution,
    ExecutionStatus,
    ExecutionTombstone,
    HostPolicyVersion,
    JournalEntry,
    RunStatus,
    TeamRole,
    TimelineEvent,
    Verdict,
)
from runs.services.lifecycle import Answer, executions, pending_requests, set_hold, submit_decisions
from runs.services.recovery import estimate, recovery, retention
from runs.services.store import checkpoints, publish_policy_version
from runs.services.worker import runner
from tests.support import factories
from tests.support.policy_admin import change_url, policy_form

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("redis_settings")]

LONG_AGO = timedelta(days=40)


class Killed(BaseException):
    """Stands in for kill -9 between two chunks: nothing in the pass handles it."""


def drive(execution: Execution) -> None:
    while (run := Execution.objects.get(pk=execution.pk).runs.filter(status=RunStatus.QUEUED).first()) is not None:
        runner.execute_run(run.pk)


def run_to_end(prompt: str, *, thread=None, user=None) -> Execution:
    """A demo execution run to its end in this process; its approvals (if any) approved by `user`."""
    thread = thread or executions.create_thread(ensure_demo_profile(), title=prompt)
    return finish(executions.start_execution(thread, prompt), user=user)


def finish(execution: Execution, *, user=None) -> Execution:
    drive(execution)
    while requests := pending_requests(Execution.objects.get(pk=execution.pk)):
        submit_decisions(
            execution,
            checkpoint_id=requests[0].checkpoint_id,
            key=f"approve-{execution.pk}-{requests[0].pk}",
            answers=[Answer(request.tool_call_id, Verdict.APPROVED) for request in requests],
            user=user,
        )
        drive(execution)
    execution.refresh_from_db()
    assert not execution.is_active, execution.status
    return execution


def age(execution: Execution, by: timedelta = LONG_AGO) -> Execution:
    Execution.objects.filter(pk=execution.pk).update(finished_at=timezone.now() - by)
    execution.refresh_from_db()
    return execution


def keep_days(days: int | None) -> None:
    factories.configure_policy(retention_days=days)


def rows_of(execution: Execution) -> tuple[int, int, int]:
    return (
        TimelineEvent.objects.filter(execution=execution).count(),
        JournalEntry.objects.filter(run__execution=execution).count(),
        Checkpoint.objects.filter(run__execution=execution).count(),
    )


# --- The policy ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["0", "-3"])
def test_a_retention_of_zero_or_fewer_days_is_a_form_error_and_publishes_nothing(admin_client, value):
    policy = executions.current_policy_version().policy
    response = admin_client.post(change_url(policy), policy_form(retention_days=value))

    assert response.status_code == 200
    errors = response.context["adminform"].form.errors["retention_days"]
    assert errors == [
        "Keep executions at least 1 day: 0 or less would purge them the moment they end. "
        "Leave it blank to keep them forever."
    ]
    assert HostPolicyVersion.objects.count() == 1


def test_a_retention_in_days_or_blank_is_published_with_the_policy(admin_client):
    policy = executions.current_policy_version().policy
    admin_client.post(change_url(policy), policy_form(retention_days="30"))
    assert executions.current_policy_version().retention_days == 30
    admin_client.post(change_url(policy), policy_form(retention_days=""))
    assert executions.current_policy_version().retention_days is None


def test_the_service_and_the_database_refuse_a_retention_of_zero_days():
    current = executions.current_policy_version()
    with pytest.raises(ValueError, match="retention_days must be blank"):
        publish_policy_version(current.policy, created_by=None, retention_days=0)
    for value in (0, -1):
        with pytest.raises(IntegrityError), transaction.atomic():
            HostPolicyVersion.objects.filter(pk=current.pk).update(retention_days=value)
    assert executions.current_policy_version().retention_days is None


# --- The pass ------------------------------------------------------------------------------------------------


def test_a_pass_purges_an_old_execution_in_chunks_and_keeps_its_tombstone_and_decisions(operator_user):
    execution = age(run_to_end("deploy the release", user=operator_user))
    timeline, journal, stored = rows_of(execution)
    assert timeline > 10 and journal > 10 and stored > 2
    decisions = list(Decision.objects.filter(request__execution=execution).values_list("pk", "verdict"))
    assert decisions and decisions[0][1] == Verdict.APPROVED
    runs = list(execution.runs.values_list("pk", "usage"))
    keep_days(30)
    chunks = []

    report = retention.run_pass(chunk_size=4, after_chunk=lambda: chunks.append(rows_of(execution)))

    assert (report.purged, report.timeline_events, report.journal_entries, report.left) == (1, timeline, journal, 0)
    # Chunk by chunk: each one a transaction of at most 4 rows, timeline first, then the journal.
    assert len(chunks) >= (timeline + journal) // 4
    assert chunks[0] == (timeline - 4, journal, stored)
    tombstone = ExecutionTombstone.objects.get(execution=execution)
    assert (tombstone.retention_days, tombstone.outcome) == (30, ExecutionStatus.COMPLETED)
    assert tombstone.finished_at is not None and tombstone.requests > 0 and tombstone.input_tokens > 0
    assert (tombstone.timeline_events, tombstone.journal_entries) == (timeline, journal)
    assert tombstone.checkpoints == report.checkpoints
    assert rows_of(execution)[:2] == (0, 0)
    # What stays: the execution, its runs and their usage, and the audit of decisions.
    execution.refresh_from_db()
    assert (execution.status, execution.created_by) == (ExecutionStatus.COMPLETED, None)
    assert list(execution.runs.values_list("pk", "usage")) == runs
    assert list(Decision.objects.filter(request__execution=execution).values_list("pk", "verdict")) == decisions


def test_the_checkpoints_a_thread_goes_on_from_are_kept():
    first = age(run_to_end("Please look up REC-42"))
    thread = first.thread
    second = run_to_end("Please look up REC-43", thread=thread)
    keep_days(30)

    report = retention.run_pass(chunk_size=3)

    assert report.purged == 1
    thread.refresh_from_db()
    # The second execution's chain starts in the first one's checkpoints: they stay, and the thread loads.
    checkpoints.load(thread.selected_checkpoint)
    assert Checkpoint.objects.filter(run__execution=second).exists()
    executions.start_execution(thread, "Please look up REC-44")


def test_a_lone_execution_loses_all_but_the_checkpoint_its_thread_continues_from():
    execution = age(run_to_end("Please look up REC-42"))
    thread = execution.thread
    keep_days(30)
    retention.run_pass()

    thread.refresh_from_db()
    left = set(Checkpoint.objects.filter(run__execution=execution).values_list("pk", flat=True))
    chain = set()
    cursor = thread.selected_checkpoint
    while cursor is not None:
        chain.add(cursor.pk)
        cursor = cursor.parent
    assert left == chain & left and thread.selected_checkpoint_id in left
    assert ExecutionTombstone.objects.get(execution=execution).checkpoints > 0
    checkpoints.load(thread.selected_checkpoint)


def test_held_threads_and_held_executions_are_skipped_and_released_ones_purged(django_user_model):
    held_thread = age(run_to_end("Please look up REC-1"))
    held_execution = age(run_to_end("Please look up REC-2"))
    admin = django_user_model.objects.create_user("keeper")
    set_hold(held_thread.thread, held=True, user=admin)
    set_hold(held_execution, held=True, user=admin)
    keep_days(30)

    assert retention.run_pass().purged == 0
    assert estimate().executions == 0
    assert not ExecutionTombstone.objects.exists()
    assert rows_of(held_thread)[0] > 0 and rows_of(held_execution)[0] > 0
    held_execution.refresh_from_db()
    assert held_execution.held_by == admin and held_execution.held_at is not None

    set_hold(held_thread.thread, held=False, user=admin)
    assert retention.run_pass().purged == 1
    assert list(ExecutionTombstone.objects.values_list("execution", flat=True)) == [held_thread.pk]


def test_unfinished_and_recent_executions_and_teams_without_retention_are_untouched():
    recent = age(run_to_end("Please look up REC-1"), by=timedelta(days=29))
    unfinished = executions.start_execution(
        executions.create_thread(ensure_demo_profile(), title="waits"), "deploy the release"
    )
    drive(unfinished)
    unfinished = age(unfinished)
    assert unfinished.status == ExecutionStatus.WAITING
    forever = age(run_to_end("Please look up REC-3"))

    assert retention.run_pass().purged == 0
    keep_days(30)
    Execution.objects.filter(pk=forever.pk).update(status=ExecutionStatus.RUNNING)

    report = retention.run_pass()

    assert report.purged == 0 and not ExecutionTombstone.objects.exists()
    for execution in (recent, unfinished, forever):
        assert rows_of(execution)[0] > 0


def test_a_pass_killed_between_chunks_shows_a_purged_page_and_the_next_pass_finishes(client, operator_user):
    execution = age(run_to_end("deploy the release", user=operator_user))
    timeline, journal, _ = rows_of(execution)
    keep_days(30)
    chunks = []

    def crash() -> None:
        chunks.append(1)
        if len(chunks) == 3:
            raise Killed

    with pytest.raises(Killed):
        retention.run_pass(chunk_size=5, after_chunk=crash)

    tombstone = ExecutionTombstone.objects.get(execution=execution)
    assert tombstone.finished_at is None and tombstone.timeline_events == 15
    assert rows_of(execution)[0] == timeline - 15
    client.force_login(operator_user)
    page = client.get(reverse("runs:execution", args=[execution.pk]))
    assert page.status_code == 200
    text = page.content.decode()
    assert "Purged on" in text and "by retention (kept 30 days)" in text and "still going on" in text
    assert 'id="timeline"' not in text

    report = retention.run_pass(chunk_size=5)

    assert (report.purged, report.timeline_events, report.journal_entries) == (1, timeline - 15, journal)
    tombstone.refresh_from_db()
    assert tombstone.finished_at is not None
    assert (tombstone.timeline_events, tombstone.journal_entries) == (timeline, journal)
    assert "still going on" not in client.get(reverse("runs:execution", args=[execution.pk])).content.decode()


def test_a_pass_out_of_chunks_leaves_the_rest_to_the_next_one():
    execution = age(run_to_end("Please look up REC-42"))
    keep_days(30)
    first = retention.run_pass(chunk_size=2, max_chunks=3)
    assert (first.purged, first.timeline_events, first.left) == (0, 6, 1)
    second = retention.run_pass(chunk_size=2)
    assert (second.purged, second.left) == (1, 0)
    assert rows_of(execution)[:2] == (0, 0)


def test_children_go_with_their_parent_never_before(operator_user):
    parent = executions.start_execution(
        executions.create_thread(ensure_demo_profile(), title="parent"), "child: deploy release 2.0"
    )
    drive(parent)
    child = finish(Execution.objects.get(parent_request__execution=parent), user=operator_user)
    parent = finish(parent)
    assert (parent.status, child.status) == (ExecutionStatus.COMPLETED, ExecutionStatus.COMPLETED)
    age(child)
    keep_days(30)

    assert retention.run_pass().purged == 0
    assert not ExecutionTombstone.objects.exists()

    age(parent)
    order = []
    retention.run_pass(
        after_chunk=lambda: order.append(ExecutionTombstone.objects.filter(finished_at=None).count()),
    )
    assert set(ExecutionTombstone.objects.values_list("execution", flat=True)) == {parent.pk, child.pk}
    # Both were marked purged together, before the first row went.
    assert order[0] == 2
    assert rows_of(child)[:2] == (0, 0)


def test_the_sweeper_loop_runs_retention_passes_of_a_few_chunks_each(monkeypatch, settings):
    execution = age(run_to_end("Please look up REC-42"))
    keep_days(30)
    settings.HARNESS_RETENTION_INTERVAL_SECONDS = 0.001
    settings.HARNESS_RETENTION_CHUNK_SIZE = 2
    settings.HARNESS_RETENTION_CHUNKS_PER_PASS = 1
    sweeps = iter(range(3))

    def sweep():
        # An operator's Ctrl-C lands in the fourth pass.
        if next(sweeps, None) is None:
            raise KeyboardInterrupt
        return recovery.SweepReport()

    monkeypatch.setattr(recovery, "sweep", sweep)
    out = io.StringIO()
    call_command("harness_recover", loop=0.01, stdout=out)

    # The first pass waits one interval; then one chunk of 2 rows a pass.
    assert out.getvalue().count("retention: purged 0, timeline events 2") >= 2
    assert ExecutionTombstone.objects.get(execution=execution).finished_at is None


# --- The dry run ---------------------------------------------------------------------------------------------


def test_the_dry_run_counts_what_the_pass_then_deletes_and_the_bytes_it_frees(admin_client, operator_user):
    old = [age(run_to_end("Please look up REC-42")), age(run_to_end("deploy the release", user=operator_user))]
    run_to_end("Please look up REC-43")
    keep_days(30)
    ids = [execution.pk for execution in old]
    timeline = TimelineEvent.objects.filter(execution__in=ids)
    journal = JournalEntry.objects.filter(run__execution__in=ids)
    expected_bytes = (
        journal.aggregate(n=Sum(Length("payload")))["n"]
        + timeline.aggregate(n=Sum(Length(Cast("event", TextField()))))["n"]
    )

    found = estimate()
    page = admin_client.get(reverse("admin:runs_hostpolicy_retention"))
    assert (found.executions, found.timeline_events, found.journal_entries) == (2, timeline.count(), journal.count())
    assert found.checkpoints > 0 and found.bytes > expected_bytes
    assert page.status_code == 200
    text = page.content.decode()
    assert f'<td class="timeline-events">{timeline.count()}</td>' in text
    assert f'title="{found.bytes} bytes"' in text
    assert not ExecutionTombstone.objects.exists()

    report = retention.run_pass()
    assert (report.purged, report.timeline_events, report.journal_entries, report.checkpoints) == (
        found.executions,
        found.timeline_events,
        found.journal_entries,
        found.checkpoints,
    )
    assert estimate().executions == 0


def test_the_command_runs_a_pass_or_only_counts_with_dry_run(capsys):
    execution = age(run_to_end("Please look up REC-42"))
    keep_days(30)
    timeline = rows_of(execution)[0]

    call_command("harness_retention", "--dry-run")
    assert f"would purge 1 executions: {timeline} timeline events" in capsys.readouterr().out
    assert rows_of(execution)[0] == timeline

    call_command("harness_retention")
    assert f"purged 1, timeline events {timeline}" in capsys.readouterr().out
    assert rows_of(execution)[0] == 0


# --- Holds and pages -----------------------------------------------------------------------------------------


def test_only_a_team_admin_may_hold_and_the_page_shows_the_hold(client, django_user_model):
    execution = run_to_end("Please look up REC-42")
    team = execution.thread.team
    operator = factories.member(django_user_model, "operator", team, TeamRole.OPERATOR)
    admin = factories.member(django_user_model, "team-admin", team, TeamRole.ADMIN)
    hold_url = reverse("runs:hold_thread", args=[execution.thread.pk])

    client.force_login(operator)
    assert client.post(hold_url, {"hold": "on"}).status_code == 403
    assert (
        "Put this thread on hold" not in client.get(reverse("runs:thread", args=[execution.thread.pk])).content.decode()
    )
    client.force_login(admin)
    assert client.post(hold_url, {"hold": "on"}).status_code == 302
    thread = execution.thread
    thread.refresh_from_db()
    assert thread.held_by == admin
    assert "On hold since" in client.get(reverse("runs:thread", args=[thread.pk])).content.decode()
    assert "Its thread is on hold" in client.get(reverse("runs:execution", args=[execution.pk])).content.decode()
    client.post(reverse("runs:hold_execution", args=[execution.pk]), {"hold": "on"})
    execution.refresh_from_db()
    assert execution.held_by == admin


def test_the_django_admin_puts_threads_and_executions_on_hold_and_releases_them(admin_client, admin_user):
    execution = run_to_end("Please look up REC-42")
    threads = reverse("admin:runs_thread_changelist")
    hold = {"action": "put_on_hold", "_selected_action": [execution.thread.pk]}

    assert admin_client.post(threads, hold).status_code == 302
    execution.thread.refresh_from_db()
    assert execution.thread.held_by == admin_user
    admin_client.post(threads, {**hold, "action": "release_hold"})
    execution.thread.refresh_from_db()
    assert execution.thread.held_at is None
    admin_client.post(
        reverse("admin:runs_execution_changelist"), {"action": "put_on_hold", "_selected_action": [execution.pk]}
    )
    execution.refresh_from_db()
    assert execution.held_by == admin_user
    assert admin_client.get(reverse("admin:runs_execution_change", args=[execution.pk])).status_code == 200


def test_a_purged_execution_cannot_be_held_and_its_pages_and_the_list_render(client, operator_user):
    execution = age(run_to_end("deploy the release", user=operator_user))
    keep_days(30)
    retention.run_pass()
    client.force_login(operator_user)

    page = client.get(reverse("runs:execution", args=[execution.pk])).content.decode()
    assert "by retention (kept 30 days)" in page and "deploy_release" in page and "approved" in page
    listing = client.get(reverse("runs:executions"))
    assert listing.status_code == 200 and f'href="/executions/{execution.pk}/"' in listing.content.decode()
    assert 'class="badge purged"' in listing.content.decode()
    assert client.get(reverse("runs:thread", args=[execution.thread.pk])).status_code == 200
    run_page = client.get(reverse("runs:run", args=[execution.runs.first().pk]))
    assert run_page.status_code == 200 and "by retention (kept 30 days)" in run_page.content.decode()
    assert client.get(reverse("runs:execution_times", args=[execution.pk])).status_code == 200
    exported = client.post(reverse("runs:export_bundle", args=[execution.pk]), {"mode": "redacted"}, follow=True)
    assert "purged by retention: its journal and timeline are gone" in exported.content.decode()

    admin = factories.member(type(operator_user), "team-admin", execution.thread.team, TeamRole.ADMIN)
    client.force_login(admin)
    response = client.post(reverse("runs:hold_execution", args=[execution.pk]), {"hold": "on"}, follow=True)
    assert "already purged" in response.content.decode()
    execution.refresh_from_db()
    assert execution.held_at is None
