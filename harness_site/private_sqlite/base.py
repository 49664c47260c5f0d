"""Django's SQLite backend, with database files only the Host's own user may read.

The file holds password hashes, sessions and the unredacted journal. SQLite would create it with the process's
umask, so it is created (mode 0600) before the first connection opens it, and an existing one is tightened; SQLite
gives its -wal and -shm files the database file's mode. Done at connection time, never when settings are imported.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.db.backends.sqlite3 import base

from harness_site.private_files import ensure_private_file


class DatabaseWrapper(base.DatabaseWrapper):
    def get_new_connection(self, conn_params: dict[str, Any]) -> Any:
        name = str(conn_params["database"])
        # In-memory databases (and SQLite URIs, which Django's test runner uses for them) have no file to protect.
        if name != ":memory:" and not name.startswith("file:"):
            ensure_private_file(Path(name))
        return super().get_new_connection(conn_params)
