"""A migrated SQLite test database kept between fast-lane runs, so an xdist worker copies a file instead of running
every migration (over ten seconds a worker; the full lane still migrates from nothing).

The template's name holds a digest of every installed app's migration files and the Django version, so a changed
or new migration makes a new template; the worker still runs `migrate` over its copy (keepdb), which applies
nothing and costs about a second.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from collections.abc import Iterable
from contextlib import closing
from pathlib import Path

import django
from django.apps import apps

from harness_site.private_files import PRIVATE

TEMPLATES = "template_*.sqlite3"


def migrations_digest(folders: Iterable[Path]) -> str:
    """A digest of the names and contents of the migration files in `folders`, and the Django version."""
    digest = hashlib.sha256(django.__version__.encode())
    for folder in folders:
        for migration in sorted(folder.glob("*.py")):
            digest.update(f"{folder.parent.name}/{migration.name}\0".encode())
            digest.update(migration.read_bytes())
    return digest.hexdigest()[:16]


def template_for(test_database: Path) -> Path:
    folders = [Path(app.path) / "migrations" for app in apps.get_app_configs()]
    return test_database.with_name(TEMPLATES.replace("*", migrations_digest(folders)))


def place(template: Path, test_database: Path) -> None:
    """Make `test_database` a fresh copy of `template`, or remove it (and its journal) when there is no template, so
    the setup migrates from nothing. A -wal file left beside the database would be replayed into the copy."""
    for stale in (test_database, *journal_files(test_database)):
        stale.unlink(missing_ok=True)
    if template.exists():
        copy(template, test_database)


def keep(test_database: Path, template: Path) -> None:
    """Save the just-migrated `test_database` as `template`, in place of the templates of older migrations; a worker
    migrating at the same time may save it too (the rename is atomic, and both copies are the same)."""
    if not template.exists():
        partial = template.with_name(f".{template.name}.{os.getpid()}")
        copy(test_database, partial)
        partial.replace(template)
        for older in template.parent.glob(TEMPLATES):
            if older != template:
                older.unlink(missing_ok=True)


def copy(source: Path, target: Path) -> None:
    """A consistent copy through SQLite's backup (the source is in WAL mode), readable by this user only."""
    os.close(os.open(target, os.O_CREAT | os.O_EXCL | os.O_WRONLY, PRIVATE))
    with closing(sqlite3.connect(source)) as reading, closing(sqlite3.connect(target)) as writing:
        reading.backup(writing)


def journal_files(database: Path) -> tuple[Path, Path]:
    return database.with_name(f"{database.name}-wal"), database.with_name(f"{database.name}-shm")
