"""The far end of the round trip between two databases: tests/host/test_postgres.py exports an execution tree on
SQLite, writes the bundle and the data its pages are drawn from, and runs this module on PostgreSQL, which imports
the bundle and must show the same pages. Without those files (any other run) there is nothing to import."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from runs.models import DEFAULT_TEAM, Execution, Team
from runs.services.lifecycle import bundle_import, forks
from tests.support.bundles import page_data, tree_of

BUNDLE = os.environ.get("HARNESS_TEST_BUNDLE")
PAGES = os.environ.get("HARNESS_TEST_BUNDLE_PAGES")

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(not (BUNDLE and PAGES), reason="run by test_postgres.py with a bundle exported on SQLite"),
]


def test_the_bundle_imported_here_shows_the_pages_it_had_there(client, django_user_model):
    assert BUNDLE and PAGES
    with Path(BUNDLE).open("rb") as source:
        transfer = bundle_import.import_bundle(source, team=Team.objects.get_or_create(name=DEFAULT_TEAM)[0])
    copy = Execution.objects.get(pk=transfer.execution_id)

    shown = json.loads(json.dumps([page_data(execution) for execution in tree_of(copy)], default=str))
    assert shown == json.loads(Path(PAGES).read_text())

    user = django_user_model.objects.create_user("pg-reader")
    user.user_permissions.add(Permission.objects.get(codename="decide_deferred"))
    client.force_login(user)
    for execution in tree_of(copy):
        for url in (
            reverse("runs:execution", args=[execution.pk]),
            reverse("runs:thread", args=[execution.thread_id]),
            *(reverse("runs:run", args=[run.pk]) for run in execution.runs.all()),
            *(reverse("runs:event", args=[execution.pk, event.position]) for event in execution.timeline.all()),
        ):
            assert client.get(url).status_code == 200, url
    assert forks.fork_thread(copy.thread.selected_checkpoint).selected_checkpoint is not None
