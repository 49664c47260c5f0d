"""`bin/test --fast` does less work without checking less: its workers copy a migrated template database, its
property tests run a fifth of their examples (tests/support/template_db.py, tests/support/property_examples.py), and
WhiteNoise finds static files on request (tests/conftest.py)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
from contextlib import closing
from pathlib import Path

import pytest
from django.db import connection
from django.db.migrations.recorder import MigrationRecorder
from django.http import HttpResponse
from hypothesis import settings as hypothesis_settings
from whitenoise.middleware import WhiteNoiseMiddleware

from tests.support import template_db
from tests.support.property_examples import FAST_PROFILE, examples


def applied_migrations(database: Path) -> set[tuple[str, str]]:
    with closing(sqlite3.connect(database)) as reading:
        return set(reading.execute("SELECT app, name FROM django_migrations"))


def test_a_copy_of_the_template_has_every_migration_applied_and_no_stale_journal(db, settings, tmp_path):
    if connection.vendor != "sqlite":
        pytest.skip("the template is a copy of an SQLite file")
    template, copy = tmp_path / "template.sqlite3", tmp_path / "copy.sqlite3"
    template_db.keep(Path(settings.DATABASES["default"]["NAME"]), template)
    copy.write_bytes(b"an old database")
    wal, shm = template_db.journal_files(copy)
    wal.write_bytes(b"an old journal")

    template_db.place(template, copy)

    assert applied_migrations(copy) == set(MigrationRecorder.Migration.objects.values_list("app", "name"))
    assert not wal.exists() and not shm.exists()
    assert copy.stat().st_mode & 0o077 == 0


def test_a_new_template_replaces_those_of_older_migrations(tmp_path):
    database, older = tmp_path / "test.sqlite3", tmp_path / "template_0000.sqlite3"
    with closing(sqlite3.connect(database)) as writing:
        writing.execute("CREATE TABLE django_migrations (app, name)")
    older.write_bytes(b"the template of older migrations")

    template_db.keep(database, tmp_path / "template_1111.sqlite3")

    assert sorted(path.name for path in tmp_path.iterdir()) == ["template_1111.sqlite3", "test.sqlite3"]
    assert applied_migrations(tmp_path / "template_1111.sqlite3") == set()


def test_without_a_template_the_database_is_removed_so_the_setup_migrates_from_nothing(tmp_path):
    stale = tmp_path / "test.sqlite3"
    stale.write_bytes(b"a database of an older schema")

    template_db.place(tmp_path / "missing.sqlite3", stale)

    assert not stale.exists()


def test_a_changed_or_added_migration_names_a_new_template(tmp_path):
    migration = tmp_path / "0001_initial.py"
    migration.write_text("operations = []\n")
    first = template_db.migrations_digest([tmp_path])
    migration.write_text("operations = ['changed']\n")
    changed = template_db.migrations_digest([tmp_path])
    (tmp_path / "0002_more.py").write_text("operations = []\n")

    assert len({first, changed, template_db.migrations_digest([tmp_path])}) == 3
    assert template_db.migrations_digest([tmp_path]) == template_db.migrations_digest([tmp_path])


def test_the_fast_profile_runs_a_fifth_of_each_property_tests_examples():
    current = hypothesis_settings.get_current_profile_name()
    try:
        hypothesis_settings.load_profile("default")
        full = [examples(500), examples(30), examples(10)]
        hypothesis_settings.load_profile(FAST_PROFILE)
        fast = [examples(500), examples(30), examples(10)]
    finally:
        hypothesis_settings.load_profile(current)

    assert full == [500, 30, 10]
    assert fast == [100, 6, 5]


@pytest.mark.parametrize("path", ["/static/img/favicon.svg", "/static/js/socket.js", "/static/admin/css/base.css"])
def test_a_static_file_found_on_request_is_served_as_the_listed_one(rf, settings, path):
    served = []
    for autorefresh in (False, True):
        settings.WHITENOISE_AUTOREFRESH = autorefresh
        response = WhiteNoiseMiddleware(lambda request: HttpResponse(status=404))(rf.get(path))
        served.append((response.status_code, dict(response.headers), b"".join(response.streaming_content)))

    assert served[0] == served[1]
    assert served[0][0] == 200


def test_the_fast_lane_finds_static_files_on_request(pytestconfig):
    from django.conf import settings

    if pytestconfig.getoption("fast"):
        assert settings.WHITENOISE_AUTOREFRESH


def test_a_missing_static_file_found_on_request_is_left_to_the_app(rf, settings):
    settings.WHITENOISE_AUTOREFRESH = True
    response = WhiteNoiseMiddleware(lambda request: HttpResponse(status=404))(rf.get("/static/img/missing.svg"))
    assert response.status_code == 404


@pytest.mark.services
def test_the_fast_lane_keeps_compiled_modules_in_the_var_directory_even_where_bytecode_is_off(tmp_path):
    checkout = Path(__file__).resolve().parents[1]
    environment = {**os.environ, "HARNESS_VAR_DIR": str(tmp_path), "PYTHONDONTWRITEBYTECODE": "1"}

    subprocess.run(
        [checkout / "bin" / "test", "--fast", "--collect-only", "-q", "tests/test_fast_lane.py"],
        cwd=checkout,
        env=environment,
        check=True,
        capture_output=True,
    )

    cached = {path.name for path in (tmp_path / "pycache").rglob("*.pyc")}
    assert any(name.startswith("test_fast_lane.") for name in cached), "pytest's rewritten test module"
    assert any(name.startswith("template_db.") for name in cached), "an imported support module"
