"""The migration that adds `Execution.shown_input` fills it for the executions stored before it, masked, and masks
the thread titles stored before titles were masked."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from runs.models import Execution, Thread
from runs.services.lifecycle import executions
from tests.support import factories

pytestmark = pytest.mark.migrations
MIGRATION = ("runs", "0012_masked_inputs_and_titles")


def migrate_again() -> None:
    """Back to before the migration (its column dropped) and forward again, so it runs over the rows as stored."""
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.get_migration(*MIGRATION).dependencies)
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
def test_inputs_stored_before_the_column_are_masked_by_their_own_policy_version():
    factories.configure_policy(redact_patterns=["token"])
    masked = executions.start_execution(factories.thread(), "call it with token=abc123 please")
    factories.configure_policy(redact_patterns=[])
    plain = executions.start_execution(factories.thread(), "call it with token=abc123 please")

    migrate_again()

    shown = dict(Execution.objects.values_list("pk", "shown_input"))
    assert shown[masked.pk] == "call it with token=[redacted] please"
    assert shown[plain.pk] == "call it with token=abc123 please"


@pytest.mark.django_db(transaction=True)
def test_thread_titles_stored_before_are_masked_by_the_current_policy_version():
    factories.configure_policy(redact_patterns=["secret"])
    thread = factories.thread()
    Thread.objects.filter(pk=thread.pk).update(title="run it with secret=hunter2")
    untouched = factories.thread()
    Thread.objects.filter(pk=untouched.pk).update(title="Weekly report")

    migrate_again()

    titles = dict(Thread.objects.values_list("pk", "title"))
    assert titles[thread.pk] == "run it with secret=[redacted]"
    assert titles[untouched.pk] == "Weekly report"
