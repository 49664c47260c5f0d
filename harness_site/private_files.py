"""Files only the Host's own user may read: the generated secret key and the SQLite database.

Both are created with mode 0600 from the first byte, never created readable and tightened afterwards, and the
secret key appears complete or not at all, so processes started together (web, worker, sweeper) agree on it.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

PRIVATE = 0o600


def create_private(path: Path, content: bytes) -> bool:
    """Create `path` holding `content`, mode 0600; False if it already exists (then it is left alone).

    The content goes to a temporary file first (mkstemp: O_CREAT|O_EXCL, mode 0600), which is then hard-linked
    to `path`: the link fails if another process got there first, so no reader ever sees a partial file.
    """
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(content)
            file.flush()
            os.fsync(file.fileno())
        try:
            os.link(temporary, path)
        except FileExistsError:
            return False
        return True
    finally:
        os.unlink(temporary)


def ensure_private_file(path: Path) -> None:
    """An empty file at `path` with mode 0600 if there is none (an empty file is an empty SQLite database);
    an existing one, and SQLite's -wal and -shm beside it, lose any group and other permissions."""
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, PRIVATE))
    for existing in (path, path.with_name(f"{path.name}-wal"), path.with_name(f"{path.name}-shm")):
        with contextlib.suppress(FileNotFoundError):
            if existing.stat().st_mode & 0o077:
                existing.chmod(PRIVATE)
