"""The runs app announces its events after the commit, from every path that ends, suspends, decides or recovers
an execution; a rolled-back transaction announces nothing."""

from __future__ import annotations

import pytest
from django.db import transaction

from runs.models import ExecutionStatus, Run, RunReason
from runs.services.lifecycle import expire_overdue_requests
from runs.services.recovery import recovery
from runs.services.store.host_events import HostEvent, announce, host_event
from runs.services.worker import runner
from tests.support import factories
from tests.support.host_runs import DEMO_TOOLS, crashed_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def announced(settings):
    """What was announced, as (event, execution pk, keys); the commit hooks run, with nothing to reach outside."""
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    settings.RQ_QUEUES = {"default": {"URL": "redis://127.0.0.1:9/0", "DEFAULT_TIMEOUT": 60}}
    settings.HARNESS_RECOVERY_BACKOFF_SECONDS = 0
    heard: list[tuple[str, int, dict]] = []

    def record(sender, *, signal, event, execution, **keys):
        heard.append((str(event), execution, keys))

    host_event.connect(record, dispatch_uid="tests-announced")
    yield heard
    host_event.disconnect(dispatch_uid="tests-announced")


def test_a_completed_run_announces_its_execution_completed(announced, django_capture_on_commit_callbacks):
    run = factories.queued_run("look up REC-42", on=factories.thread(model="demo", tools=DEMO_TOOLS))
    with django_capture_on_commit_callbacks(execute=True):
        assert runner.execute_run(run.pk) == "completed"
    assert announced == [("execution.completed", run.execution_id, {})]


def test_a_suspension_asks_for_approval_and_an_expiry_decides(announced, django_capture_on_commit_callbacks):
    factories.configure_policy(approval_timeout_seconds=1)
    run = factories.queued_run("deploy release 2.0", on=factories.thread(model="demo", tools=DEMO_TOOLS))
    with django_capture_on_commit_callbacks(execute=True):
        assert runner.execute_run(run.pk) == "suspended"
    run.execution.thread.refresh_from_db()
    checkpoint = run.execution.thread.selected_checkpoint_id
    assert announced == [("approval.requested", run.execution_id, {"checkpoint": checkpoint})]

    run.execution.deferred_requests.update(expires_at=run.created_at)
    with django_capture_on_commit_callbacks(execute=True):
        assert expire_overdue_requests() == 1
    [(event, execution, keys)] = announced[1:]
    assert (event, execution, set(keys)) == ("approval.decided", run.execution_id, {"submission"})


def test_a_recovery_run_announces_the_execution_recovered(announced, monkeypatch, django_capture_on_commit_callbacks):
    dead = crashed_run(monkeypatch)
    with django_capture_on_commit_callbacks(execute=True):
        recovery.sweep()
    successor = Run.objects.get(execution=dead.execution, reason=RunReason.RECOVERY)
    assert announced == [("execution.recovered", dead.execution_id, {"run": successor.pk})]


def test_recovery_that_gives_up_announces_the_execution_failed(
    announced, monkeypatch, django_capture_on_commit_callbacks
):
    factories.configure_policy(max_attempts=1)
    dead = crashed_run(monkeypatch)
    with django_capture_on_commit_callbacks(execute=True):
        recovery.sweep()
    dead.execution.refresh_from_db()
    assert dead.execution.status == ExecutionStatus.FAILED
    assert announced == [("execution.failed", dead.execution_id, {})]


def test_a_rolled_back_transaction_announces_nothing(announced, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True), pytest.raises(RuntimeError), transaction.atomic():
        announce(HostEvent.EXECUTION_COMPLETED, execution=1)
        raise RuntimeError("rolled back")
    assert announced == []
