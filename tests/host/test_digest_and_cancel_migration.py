"""Migration 0013 keys the approved arguments' digests stored before it, and drops (recording it) a cancel request
that a waiting execution still holds."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from runs.models import Decision, DroppedCancelRequest, Execution, ExecutionStatus
from runs.services.lifecycle import Answer, args_digest, submit_decisions
from runs.services.lifecycle.approvals import canonical_json
from tests.support import factories
from tests.support.factories import suspended_execution

pytestmark = pytest.mark.migrations
MIGRATION = ("runs", "0013_keyed_digests_and_dropped_cancels")


def migrate(to: list[tuple[str, str]] | None = None) -> None:
    """To the given nodes, or forward to the latest."""
    executor = MigrationExecutor(connection)
    executor.migrate(to if to is not None else executor.loader.graph.leaf_nodes())


def before_the_migration() -> None:
    """Back to the runs migration before it (its table dropped, its digests unkeyed again)."""
    dependencies = MigrationExecutor(connection).loader.get_migration(*MIGRATION).dependencies
    migrate([node for node in dependencies if node[0] == "runs"])


@pytest.mark.django_db(transaction=True)
def test_digests_stored_unkeyed_are_keyed_from_the_stored_arguments(django_user_model):
    waiting = suspended_execution()
    submit_decisions(
        waiting.execution,
        checkpoint_id=waiting.checkpoint_id,
        key="before-0013",
        answers=[Answer("call-pay", "approved"), Answer("call-del", "denied", message="no")],
        user=factories.create_decider(django_user_model, "approver", "approver-password-1"),
    )
    approved = {"amount": 5000, "to": "acme"}
    before_the_migration()
    stored = dict(Decision.objects.values_list("request__tool_call_id", "args_digest"))
    assert stored == {"call-pay": hashlib.sha256(canonical_json(approved).encode()).hexdigest(), "call-del": ""}
    # A digest without the arguments it was taken of cannot be keyed: it goes.
    Decision.objects.filter(request__tool_call_id="call-del").update(args_digest="0" * 64)

    migrate()

    keyed = dict(Decision.objects.values_list("request__tool_call_id", "args_digest"))
    assert keyed == {"call-pay": args_digest(approved), "call-del": ""}


@pytest.mark.django_db(transaction=True)
def test_a_cancel_request_a_waiting_execution_holds_is_dropped_and_recorded(django_user_model):
    waiting = suspended_execution()
    running = factories.leased_run()[0].execution
    viewer = django_user_model.objects.create_user("viewer")
    asked = timezone.now() - timedelta(minutes=5)
    before_the_migration()
    held = {"cancel_requested": True, "cancelled_by": viewer, "cancelled_at": asked}
    Execution.objects.filter(pk__in=[waiting.execution.pk, running.pk]).update(**held)

    migrate()

    execution = Execution.objects.get(pk=waiting.execution.pk)
    held_now = (execution.status, execution.cancel_requested, execution.cancelled_by, execution.cancelled_at)
    assert held_now == (ExecutionStatus.WAITING, False, None, None)
    dropped = DroppedCancelRequest.objects.get()
    assert (dropped.execution, dropped.run, dropped.requested_by, dropped.requested_at) == (
        waiting.execution,
        waiting.run,
        viewer,
        asked,
    )
    running.refresh_from_db()
    assert (running.cancel_requested, running.cancelled_by, running.cancelled_at) == (True, viewer, asked)
