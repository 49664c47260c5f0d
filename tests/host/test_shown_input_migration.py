"""The migration that adds `Execution.shown_input` fills it for the executions stored before it, masked."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from runs.models import Execution
from runs.services import executions
from tests import factories

MIGRATION = ("runs", "0012_execution_shown_input")


@pytest.mark.django_db(transaction=True)
def test_inputs_stored_before_the_column_are_masked_by_their_own_policy_version():
    factories.configure_policy(redact_patterns=["token"])
    masked = executions.start_execution(factories.thread(), "call it with token=abc123 please")
    factories.configure_policy(redact_patterns=[])
    plain = executions.start_execution(factories.thread(), "call it with token=abc123 please")

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.get_migration(*MIGRATION).dependencies)
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())

    shown = dict(Execution.objects.values_list("pk", "shown_input"))
    assert shown[masked.pk] == "call it with token=[redacted] please"
    assert shown[plain.pk] == "call it with token=abc123 please"
