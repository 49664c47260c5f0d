"""The migration that adds the policy's range constraints clamps rows written before them, and says so."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.migrations
MIGRATION = ("runs", "0005_policy_version_limits")
# Out of range, yet storable in every backend's integer column (SQLite also took 10**15, PostgreSQL cannot).
HUGE = 2**31 - 1


@pytest.mark.django_db(transaction=True)
def test_out_of_range_versions_are_clamped_with_a_note_and_good_ones_are_left_alone(capsys):
    executor = MigrationExecutor(connection)
    before = executor.loader.get_migration(*MIGRATION).dependencies
    executor.migrate(before)
    old = MigrationExecutor(connection).loader.project_state(before).apps
    policy = old.get_model("runs", "HostPolicy").objects.create(name="legacy")
    versions = old.get_model("runs", "HostPolicyVersion").objects
    broken = versions.create(
        policy=policy, number=1, lease_seconds=HUGE, max_attempts=0, approval_timeout_seconds=HUGE, comment="old"
    )
    sound = versions.create(policy=policy, number=2, lease_seconds=30, max_attempts=3, comment="fine")

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())

    from runs.models import HostPolicyVersion

    broken, sound = HostPolicyVersion.objects.get(pk=broken.pk), HostPolicyVersion.objects.get(pk=sound.pk)
    assert (broken.lease_seconds, broken.max_attempts, broken.approval_timeout_seconds) == (3600, 1, 2592000)
    assert broken.comment.startswith("old\n[migration 0005 clamped out-of-range values: ")
    assert f"lease_seconds {HUGE} -> 3600" in broken.comment and "max_attempts 0 -> 1" in broken.comment
    assert (sound.lease_seconds, sound.max_attempts, sound.comment) == (30, 3, "fine")
    printed = capsys.readouterr().out
    assert f"policy version {broken.pk} (number 1)" in printed and f"version {sound.pk} " not in printed
