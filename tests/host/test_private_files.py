"""The generated secret key and the SQLite database are owner-only from the moment they exist."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from harness_site.private_files import create_private
from tests.support.services import ROOT

# Writing makes SQLite create its -wal and -shm files, which it removes when the last connection closes: their
# modes are read while the connection is open.
TOUCH_DATABASE = """
import django, os, stat
from pathlib import Path
from harness_site.var_dir import prepare_var_dir
prepare_var_dir(Path(os.environ["HARNESS_VAR_DIR"]))  # what bin/setup, bin/run and bin/test do first
django.setup()
from django.conf import settings
from django.db import connection
connection.cursor().execute("create table if not exists t (x)")
names = ["secret_key", "db.sqlite3", "db.sqlite3-wal", "db.sqlite3-shm"]
modes = [oct(stat.S_IMODE(os.stat(settings.HARNESS_VAR_DIR / name).st_mode)) for name in names]
print(settings.SECRET_KEY, *modes)
"""


def start_settings(var_dir: Path) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k not in ("SECRET_KEY", "DATABASE_URL")}
    env.update(HARNESS_VAR_DIR=str(var_dir), DJANGO_SETTINGS_MODULE="harness_site.settings")
    # A permissive umask, as a service manager might leave it: the modes must not depend on it.
    return subprocess.Popen(
        [sys.executable, "-c", TOUCH_DATABASE],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: os.umask(0o022),
    )


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.services
def test_processes_started_together_create_one_private_key_and_a_private_database(tmp_path):
    var_dir = tmp_path / "var"
    processes = [start_settings(var_dir) for _ in range(6)]
    reports = {process.communicate(timeout=120)[0].strip() for process in processes}
    assert all(process.returncode == 0 for process in processes)

    assert len(reports) == 1
    key, *modes = reports.pop().split()
    assert (var_dir / "secret_key").read_text().strip() == key
    assert modes == ["0o600"] * 4
    assert not [path.name for path in var_dir.iterdir() if path.name.startswith(".secret_key")]


@pytest.mark.services
def test_an_existing_world_readable_database_is_tightened(tmp_path):
    var_dir = tmp_path / "var"
    var_dir.mkdir()
    database = var_dir / "db.sqlite3"
    database.touch()
    database.chmod(0o644)
    process = start_settings(var_dir)
    process.communicate(timeout=120)
    assert process.returncode == 0
    assert mode(database) == 0o600


def test_create_private_never_replaces_an_existing_file(tmp_path):
    target = tmp_path / "key"
    assert create_private(target, b"first")
    assert not create_private(target, b"second")
    assert target.read_bytes() == b"first"
    assert mode(target) == 0o600
