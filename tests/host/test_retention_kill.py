"""Retention on a real process: `manage.py harness_retention` killed with SIGKILL in the middle of a purge leaves an
execution whose page shows it purged (not a broken timeline), and the next pass finishes the purge; a pass skips what
is on hold, and purges it once released."""

from __future__ import annotations

import sys
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from runs.demo_profile import ensure_demo_profile
from runs.models import Execution, ExecutionTombstone, JournalEntry, RunStatus, TimelineEvent
from runs.services.lifecycle import executions, set_hold
from runs.services.recovery import retention
from runs.services.worker import runner
from tests.support import factories
from tests.support.services import ManagedProcess, service_env, wait_until

pytestmark = [pytest.mark.services, pytest.mark.usefixtures("redis_settings")]

EXTRA_EVENTS = 3000


def completed_execution(prompt: str) -> Execution:
    thread = executions.create_thread(ensure_demo_profile(), title=prompt)
    execution = executions.start_execution(thread, prompt)
    run = execution.runs.get(status=RunStatus.QUEUED)
    assert runner.execute_run(run.pk) == "completed"
    return execution


def finished_days_ago(execution: Execution, days: int) -> Execution:
    Execution.objects.filter(pk=execution.pk).update(finished_at=timezone.now() - timedelta(days=days))
    return execution


def retention_pass_in_a_process(env: dict[str, str]) -> None:
    """`manage.py harness_retention` run to its end, as an operator or cron would."""
    command = ManagedProcess("retention", [sys.executable, "manage.py", "harness_retention"], env).start()
    try:
        wait_until(lambda: command.popen.poll() is not None, timeout=120, what=f"the pass to end\n{command.log()}")
        assert command.popen.returncode == 0, command.log()
    finally:
        command.stop()


def old_execution_with_many_events() -> Execution:
    execution = completed_execution("Please look up REC-42")
    # Many more rows than one chunk, so the kill lands between two chunks of the pass.
    last = TimelineEvent.objects.filter(execution=execution).order_by("-position").first()
    assert last is not None
    TimelineEvent.objects.bulk_create(
        TimelineEvent(
            execution=execution,
            position=last.position + offset,
            run=last.run,
            event_type="CUSTOM",
            event={"type": "CUSTOM", "name": "padding", "value": offset},
            occurred_at=last.occurred_at,
        )
        for offset in range(1, EXTRA_EVENTS + 1)
    )
    return finished_days_ago(execution, 40)


def test_a_retention_command_killed_mid_pass_leaves_a_clean_purged_page_and_the_next_pass_finishes(
    transactional_db, redis_server, settings, client, operator_user
):
    execution = old_execution_with_many_events()
    timeline = TimelineEvent.objects.filter(execution=execution).count()
    journal = JournalEntry.objects.filter(run__execution=execution).count()
    factories.configure_policy(retention_days=30)
    env = service_env(redis_url=redis_server.url, database_name=settings.DATABASES["default"]["NAME"])
    command = ManagedProcess(
        "retention",
        [sys.executable, "manage.py", "harness_retention"],
        {**env, "HARNESS_RETENTION_CHUNK_SIZE": "1"},
    ).start()
    try:
        wait_until(
            lambda: ExecutionTombstone.objects.filter(execution=execution, timeline_events__gte=20).exists(),
            timeout=120,
            what=f"the pass to delete some chunks\n{command.log()}",
        )
        command.kill()
    finally:
        command.stop()

    tombstone = ExecutionTombstone.objects.get(execution=execution)
    assert tombstone.finished_at is None, "the pass ended before it was killed"
    left = TimelineEvent.objects.filter(execution=execution).count()
    assert left == timeline - tombstone.timeline_events and 0 < left < timeline
    client.force_login(operator_user)
    page = client.get(reverse("runs:execution", args=[execution.pk]))
    assert page.status_code == 200
    text = page.content.decode()
    assert "by retention (kept 30 days)" in text and "still going on" in text and 'id="timeline"' not in text

    report = retention.run_pass()

    assert (report.purged, report.timeline_events, report.journal_entries) == (1, left, journal)
    tombstone.refresh_from_db()
    assert tombstone.finished_at is not None
    assert (tombstone.timeline_events, tombstone.journal_entries) == (timeline, journal)
    assert not TimelineEvent.objects.filter(execution=execution).exists()


def test_a_retention_process_skips_what_is_on_hold_and_purges_it_once_released(
    transactional_db, redis_server, settings, django_user_model
):
    expired = finished_days_ago(completed_execution("Please look up REC-1"), 40)
    held_execution = finished_days_ago(completed_execution("Please look up REC-2"), 40)
    held_thread = finished_days_ago(completed_execution("Please look up REC-3"), 40)
    keeper = django_user_model.objects.create_user("keeper")
    set_hold(held_execution, held=True, user=keeper)
    set_hold(held_thread.thread, held=True, user=keeper)
    factories.configure_policy(retention_days=30)
    env = service_env(redis_url=redis_server.url, database_name=settings.DATABASES["default"]["NAME"])

    retention_pass_in_a_process(env)

    assert list(ExecutionTombstone.objects.values_list("execution", flat=True)) == [expired.pk]
    assert not TimelineEvent.objects.filter(execution=expired).exists()
    for kept in (held_execution, held_thread):
        assert TimelineEvent.objects.filter(execution=kept).exists()
        assert JournalEntry.objects.filter(run__execution=kept).exists()

    set_hold(held_execution, held=False, user=keeper)
    retention_pass_in_a_process(env)

    assert set(ExecutionTombstone.objects.values_list("execution", flat=True)) == {expired.pk, held_execution.pk}
    assert not TimelineEvent.objects.filter(execution=held_execution).exists()
    assert TimelineEvent.objects.filter(execution=held_thread).exists()
