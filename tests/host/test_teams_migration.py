"""The migration that adds teams changes nothing for a single-team install: every profile, policy and thread
joins the team `default`, and every user joins it with the rights they had (deciders approve, staff deciders
administer, everyone else operates), so each keeps seeing and doing what they did."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from runs.models import AgentProfile, HostPolicy, Membership, Team, TeamRole, Thread

pytestmark = pytest.mark.migrations
MIGRATION = ("runs", "0014_teams")


@pytest.mark.django_db(transaction=True)
def test_existing_rows_and_users_join_the_default_team_with_their_rights(without_default_membership):
    users = get_user_model().objects
    plain = users.create_user("plain")
    decider = users.create_user("decider")
    staff_decider = users.create_user("staff-decider", is_staff=True)
    root = users.create_superuser("root")
    executor = MigrationExecutor(connection)
    before = executor.loader.get_migration(*MIGRATION).dependencies
    executor.migrate([key for key in before if key[0] == "runs"])
    old = MigrationExecutor(connection).loader.project_state([key for key in before if key[0] == "runs"]).apps
    for user in (decider, staff_decider):
        user.user_permissions.add(Permission.objects.get(codename="decide_deferred"))
    profile = old.get_model("runs", "AgentProfile").objects.create(name="helper", model="demo")
    old.get_model("runs", "HostPolicy").objects.create(name="default")
    old.get_model("runs", "HostPolicy").objects.create(name="unused")
    old.get_model("runs", "Thread").objects.create(thread_id="thread-1", profile_id=profile.pk)

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())

    default = Team.objects.get(name="default")
    assert AgentProfile.objects.get().team == default
    assert Thread.objects.get().team == default
    assert HostPolicy.objects.get(name="default").team == default
    # A policy other than `default` governed nothing, and governs nothing still: its own team has no profiles.
    assert not HostPolicy.objects.get(name="unused").team.profiles.exists()
    roles = dict(Membership.objects.filter(team=default).values_list("user__username", "role"))
    assert roles == {
        plain.username: TeamRole.OPERATOR,
        decider.username: TeamRole.APPROVER,
        staff_decider.username: TeamRole.ADMIN,
        root.username: TeamRole.ADMIN,
    }
