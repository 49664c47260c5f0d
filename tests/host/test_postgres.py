"""The host's database tests again, on a temporary PostgreSQL cluster (SQLite is the default elsewhere)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Permission

from harness_site.var_dir import prepare_var_dir
from tests.support.bundles import ended_tree, exported, page_data, tree_of
from tests.support.services import ROOT, free_port

pytestmark = pytest.mark.postgres


def installed_postgres_bin(root: Path = Path("/usr/lib/postgresql")) -> Path | None:
    """POSTGRES_BIN, else the newest server Debian installed (`<root>/<version>/bin`); None without one."""
    if configured := os.environ.get("POSTGRES_BIN"):
        return Path(configured)
    found = root.glob("*/bin/initdb")
    newest = max(
        found, key=lambda initdb: [int(part) for part in initdb.parts[-3].split(".") if part.isdigit()], default=None
    )
    return newest.parent if newest is not None else None


PG_BIN = installed_postgres_bin()
HOST_TESTS = [
    "tests/host/test_journal.py",
    # The hot path's rows go in as one unnest of binary arrays per table; the new rows' keys come back by RETURNING.
    "tests/host/test_row_inserts.py",
    "tests/host/test_execution.py",
    "tests/host/test_concurrent_sweeps.py",
    "tests/host/test_policy_limits_migration.py",
    "tests/host/test_digest_and_cancel_migration.py",
    "tests/host/test_token_expiry_migration.py",
    # Host-managed children take row locks (child before parent), which SQLite does not.
    "tests/host/test_children.py",
    # Savepoints per run inside one group transaction, and row locks across runs.
    "tests/host/test_commit_group.py",
    # A boundary's batch and its checkpoint in one transaction; a refused checkpoint rolled back to its savepoint.
    "tests/host/test_batching.py",
]
# This wave's features, a run of their own so that neither list nears its timeout on a busy machine.
FEATURE_TESTS = [
    # Deliveries are claimed and moved on with conditional UPDATEs; one per subject is a unique key.
    "tests/alerts/test_webhooks.py",
    # Sums read keys of the runs' JSON (usage, the profile snapshot's model) through values().
    "tests/web/test_usage.py",
    # The duration model finds decisions by a key inside the event's JSON.
    "tests/host/test_durations.py",
    # The threads list orders by the last event of each thread's newest execution (a subquery per row).
    "tests/web/test_thread_forms.py",
    # A bundle's replay runs the worker's loop inside one transaction that it rolls back.
    "tests/host/test_replay.py",
    # The compare view reads two runs' events and usage across executions, teams scoped.
    "tests/host/test_run_comparison.py",
    # A what-if writes its fork, edited checkpoint and queued run in one transaction and stores its change as JSON.
    "tests/host/test_what_if.py",
    # Recovering a failed execution locks its thread's row, then its own (of=self), as starting one does.
    "tests/host/test_failed_recovery.py",
    # Retention deletes in chunks by id lists, locks executions `of=("self",)` and sums Length() of JSON cast to text.
    "tests/host/test_retention.py",
    "tests/host/test_retention_kill.py",
    # A re-mask moves its cursor and counts with conditional F() UPDATEs and rewrites JSON in chunked bulk updates.
    "tests/host/test_remask.py",
    # A budget sums a window's runs filtered on a key of their JSON profile snapshot, and a suspension and override.
    "tests/host/test_budgets.py",
]
# Team scoping is subqueries on memberships on every read; the per-team thread id is a composite unique key. The
# matrix is every role on every surface: a run of its own.
TEAM_TESTS = ["tests/web/test_team_access.py", "tests/host/test_teams_migration.py"]


def test_the_newest_installed_server_is_found_whatever_its_version(tmp_path, monkeypatch):
    monkeypatch.delenv("POSTGRES_BIN", raising=False)
    assert installed_postgres_bin(tmp_path) is None
    for version in ("9.6", "15", "16", "common"):
        (tmp_path / version / "bin").mkdir(parents=True)
    for version in ("9.6", "15", "16"):
        (tmp_path / version / "bin" / "initdb").touch()
    assert installed_postgres_bin(tmp_path) == tmp_path / "16" / "bin"


def _as_postgres_user(argv: list[str]) -> list[str]:
    # initdb refuses to run as root; an unprivileged system account needs no setup.
    return ["runuser", "-u", "nobody", "--", *argv] if os.geteuid() == 0 else argv


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    if PG_BIN is None or not (PG_BIN / "initdb").exists():
        pytest.skip(f"PostgreSQL server binaries not found in {PG_BIN or '/usr/lib/postgresql/*/bin'}; run bin/setup")
    root = Path(tempfile.mkdtemp(prefix="harness-pg-"))
    root.chmod(0o755)
    (root / "sock").mkdir()
    if os.geteuid() == 0:
        shutil.chown(root, "nobody", "nogroup")
        shutil.chown(root / "sock", "nobody", "nogroup")
    data, port = root / "data", free_port()
    run: dict[str, Any] = {"check": True, "capture_output": True, "timeout": 60}
    subprocess.run(
        _as_postgres_user([str(PG_BIN / "initdb"), "-D", str(data), "-U", "app", "--auth=trust", "-E", "UTF8"]),
        **run,
    )
    options = f"-p {port} -k {root / 'sock'} -c listen_addresses=127.0.0.1 -c fsync=off"
    pg_ctl = [str(PG_BIN / "pg_ctl"), "-D", str(data), "-l", str(root / "server.log")]
    subprocess.run(_as_postgres_user([*pg_ctl, "-o", options, "-w", "start"]), **run)
    try:
        subprocess.run([str(PG_BIN / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "app", "app"], **run)
        yield f"postgres://app@127.0.0.1:{port}/app"
    finally:
        subprocess.run(_as_postgres_user([*pg_ctl, "-m", "fast", "-w", "stop"]), capture_output=True, timeout=60)
        shutil.rmtree(root, ignore_errors=True)


def pytest_on_postgresql(
    postgres_url: str, var_dir: Path, tests: list[str], *, timeout: float, env: dict[str, str] | None = None
) -> str:
    prepare_var_dir(var_dir)
    env = {**os.environ, "DATABASE_URL": postgres_url, "HARNESS_VAR_DIR": str(var_dir), **(env or {})}
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", *tests, "-q", "-p", "no:cacheprovider", "-x", "--tb=short"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert completed.returncode == 0, completed.stdout[-6000:] + completed.stderr[-2000:]
    assert "passed" in completed.stdout
    return completed.stdout


def test_the_host_database_tests_pass_on_postgresql(postgres_url, tmp_path):
    pytest_on_postgresql(postgres_url, tmp_path, HOST_TESTS, timeout=600)


def test_this_waves_features_on_postgresql(postgres_url, tmp_path):
    pytest_on_postgresql(postgres_url, tmp_path, FEATURE_TESTS, timeout=1200)


def test_team_access_on_postgresql(postgres_url, tmp_path):
    pytest_on_postgresql(postgres_url, tmp_path, TEAM_TESTS, timeout=1200)


def test_scale_out_under_chaos_on_postgresql(postgres_url, tmp_path):
    pytest_on_postgresql(postgres_url, tmp_path, ["tests/host/test_scale_out.py"], timeout=900)


def test_hostile_input_is_refused_on_postgresql(postgres_url, tmp_path):
    # PostgreSQL refuses NUL bytes that SQLite stores: the hostile input must be refused before it reaches either.
    pytest_on_postgresql(postgres_url, tmp_path, ["tests/web/test_hostile_input.py", "-m", "not browser"], timeout=1200)


def test_the_audit_export_and_the_paginated_lists_on_postgresql(postgres_url, tmp_path):
    # The CSV export reads its rows through one cursor (a server-side one on PostgreSQL) a batch at a time; the
    # inbox and a thread's executions are paginated. The audit page's JSON test is left out: jsonb keeps keys in its
    # own order, so the page's pretty-printed arguments differ there from the text the test expects.
    tests = [
        "tests/web/test_audit.py",
        "tests/web/test_approval_views.py",
        "tests/web/test_pages.py",
        "--deselect",
        "tests/web/test_audit.py::test_decisions_show_json_and_link_to_thread_execution_and_runs",
    ]
    pytest_on_postgresql(postgres_url, tmp_path, tests, timeout=900)


@pytest.mark.django_db
def test_a_bundle_exported_on_sqlite_shows_the_same_pages_imported_on_postgresql(
    postgres_url, tmp_path, settings, django_user_model
):
    # The two Hosts share the bundle key, as two Hosts that trust each other's bundles are configured.
    settings.HARNESS_BUNDLE_KEY = "a key both hosts hold"
    approver = django_user_model.objects.create_user("sqlite-approver")
    approver.user_permissions.add(Permission.objects.get(codename="decide_deferred"))
    tree = ended_tree(django_user_model.objects.get(pk=approver.pk))
    bundle, pages = tmp_path / "tree.zip", tmp_path / "pages.json"
    bundle.write_bytes(exported(tree))
    pages.write_text(json.dumps([page_data(execution) for execution in tree_of(tree)], default=str))

    output = pytest_on_postgresql(
        postgres_url,
        tmp_path / "var",
        ["tests/host/test_bundle_elsewhere.py"],
        timeout=600,
        env={
            "HARNESS_BUNDLE_KEY": settings.HARNESS_BUNDLE_KEY,
            "HARNESS_TEST_BUNDLE": str(bundle),
            "HARNESS_TEST_BUNDLE_PAGES": str(pages),
        },
    )
    assert "1 passed" in output and "skipped" not in output, output


def test_the_executions_list_and_its_query_plans_on_postgresql(postgres_url, tmp_path):
    # The list's keyset pages, filters and counts, and the plans that show each query reads its index.
    pytest_on_postgresql(
        postgres_url,
        tmp_path,
        [
            "tests/web/test_execution_list.py",
            "tests/web/test_execution_counts.py",
            "tests/web/test_saved_views.py",
            "tests/web/test_bulk_actions.py",
        ],
        timeout=900,
    )
