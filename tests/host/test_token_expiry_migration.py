"""The migration that gives API tokens a scope and an expiry keeps the tokens issued before it working: they may
still do everything (`read+decide`) and expire 90 days after the upgrade, whatever HARNESS_API_TOKEN_DAYS says."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from agui_api.models import ApiToken, TokenScope

pytestmark = pytest.mark.migrations
MIGRATION = ("agui_api", "0002_token_expiry_and_scope")


@pytest.mark.django_db(transaction=True)
def test_tokens_issued_before_the_upgrade_may_still_decide_for_90_days(settings):
    settings.HARNESS_API_TOKEN_DAYS = 7
    owner = get_user_model().objects.create_user("owner")
    executor = MigrationExecutor(connection)
    before = executor.loader.get_migration(*MIGRATION).dependencies
    executor.migrate(before)
    old = MigrationExecutor(connection).loader.project_state(before).apps.get_model("agui_api", "ApiToken")
    old.objects.create(user_id=owner.pk, name="copilot", digest="d" * 64, hint="hh_abcdefg")

    upgraded = timezone.now()
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())

    token = ApiToken.objects.get()
    assert token.scope == TokenScope.READ_DECIDE
    assert upgraded + timedelta(days=90) <= token.expires_at <= timezone.now() + timedelta(days=90)
    assert list(ApiToken.objects.usable()) == [token]
