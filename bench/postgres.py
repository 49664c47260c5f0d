"""A throw-away PostgreSQL cluster for the benchmarks: initdb and pg_ctl as `nobody`.

initdb refuses to run as root, so the cluster's directory belongs to `nobody` and the server runs as that
user on a free TCP port with fsync off (a benchmark measures the Host's work, not this disk's flush).
"""

from __future__ import annotations

import contextlib
import getpass
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.services import free_port

__all__ = ("Cluster", "available", "temporary_cluster")

DATABASE = "bench"
USER = "app"


def _bin_dir() -> Path | None:
    root = Path("/usr/lib/postgresql")
    versions = sorted(root.glob("*/bin/initdb"), key=lambda path: int(path.parent.parent.name))
    return versions[-1].parent if versions else None


def available() -> bool:
    return _bin_dir() is not None


@dataclass(frozen=True)
class Cluster:
    port: int
    version: str

    @property
    def url(self) -> str:
        return f"postgres://{USER}@127.0.0.1:{self.port}/{DATABASE}"


def _as_owner(argv: list[str]) -> list[str]:
    return ["runuser", "-u", "nobody", "--", *argv] if getpass.getuser() == "root" else argv


@contextlib.contextmanager
def temporary_cluster() -> Iterator[Cluster]:
    bin_dir = _bin_dir()
    if bin_dir is None:
        raise RuntimeError("PostgreSQL is not installed (/usr/lib/postgresql/*/bin/initdb)")
    base = Path(tempfile.mkdtemp(prefix="harness-bench-pg-"))
    data, sockets = base / "data", base / "sock"
    sockets.mkdir()
    if getpass.getuser() == "root":
        shutil.chown(base, "nobody", "nogroup")
        shutil.chown(sockets, "nobody", "nogroup")
    port = free_port()
    quiet: dict[str, Any] = {"stdout": subprocess.DEVNULL, "stderr": subprocess.STDOUT, "check": True, "cwd": base}
    try:
        subprocess.run(
            _as_owner([str(bin_dir / "initdb"), "-D", str(data), "-U", USER, "--auth=trust", "-E", "UTF8"]), **quiet
        )
        options = f"-p {port} -k {sockets} -c listen_addresses=127.0.0.1 -c fsync=off"
        subprocess.run(
            _as_owner(
                [str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(base / "server.log"), "-o", options, "-w", "start"]
            ),
            **quiet,
        )
        subprocess.run(
            [str(bin_dir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", USER, DATABASE],
            **quiet,
            env={**os.environ, "PGCONNECT_TIMEOUT": "10"},
        )
        version = subprocess.run(
            [str(bin_dir / "postgres"), "--version"], capture_output=True, text=True, check=True
        ).stdout.strip()
        yield Cluster(port=port, version=version)
    finally:
        subprocess.run(
            _as_owner([str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"]),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=base,
        )
        shutil.rmtree(base, ignore_errors=True)
