"""The migration that adds `TimelineEvent.origin` marks the decision items stored before it as the Host's."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from runs.models import TimelineEvent, TimelineOrigin
from tests.support import factories

pytestmark = pytest.mark.migrations
MIGRATION = ("runs", "0010_timeline_origin")


@pytest.mark.django_db(transaction=True)
def test_decision_items_stored_before_the_column_become_host_items_and_nothing_else_does():
    run = factories.queued_run()
    rows = {
        "decision": {"type": "CUSTOM", "name": "a13n.host.decision", "value": {}},
        "other custom": {"type": "CUSTOM", "name": "a13n.harness.state", "value": {}},
        "closed lane": {"type": "RUN_ERROR", "message": "worker lost"},
    }
    for position, event in enumerate(rows.values(), start=1):
        TimelineEvent.objects.create(
            execution=run.execution,
            position=position,
            run=run,
            event_type=event["type"],
            event=event,
            occurred_at=timezone.now(),
        )

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.get_migration(*MIGRATION).dependencies)
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())

    origins = dict(TimelineEvent.objects.filter(run=run).values_list("position", "origin"))
    assert origins == {1: TimelineOrigin.HOST, 2: TimelineOrigin.RUN, 3: TimelineOrigin.RUN}
