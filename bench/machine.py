"""The machine description every result file and BENCHMARKS.md carry."""

from __future__ import annotations

import os
import platform
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = ("describe",)


def _cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def _memory_gib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return round(int(line.split()[1]) / 1024 / 1024, 1)
    return 0.0


def _commit() -> str:
    found = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False)
    # The run's own outputs (the results it just cleared, the table it will write) do not make the code dirty.
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--", ".", ":(exclude)bench/results", ":(exclude)BENCHMARKS.md"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    return (found.stdout.strip() or "unknown") + (" + uncommitted changes" if dirty.strip() else "")


def describe(postgresql: str | None) -> dict[str, Any]:
    return {
        "nproc": os.cpu_count(),
        "memory_gib": _memory_gib(),
        "cpu_model": _cpu_model(),
        "python": sys.version.split()[0],
        "sqlite": sqlite3.sqlite_version,
        "postgresql": postgresql or "not used",
        "platform": platform.platform(),
        "load_average_at_start": [round(value, 2) for value in os.getloadavg()],
        "commit": _commit(),
    }
