"""`bin/bench [--quick]`: start Redis (and a temporary PostgreSQL), run every benchmark, write the table.

The full run measures 1k, 10k and 100k item runs on SQLite (and the journal also on PostgreSQL) and rewrites
BENCHMARKS.md; `--quick` measures only 1k items (fewer for the live run), 3 repetitions, SQLite only, as a smoke test of
the suite itself: its figures are not to be quoted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.services import RedisServer

from . import postgres
from .machine import describe
from .measure import RESULTS_DIR
from .suite import BENCHMARKS
from .table import render

ROOT = Path(__file__).resolve().parent.parent
FULL_SIZES = "1k,10k,100k"
QUICK_SIZES = "1k"
REPEATS = 5
# A smoke run of the suite itself: fewer repetitions, so the test suite can afford it.
QUICK_REPEATS = 3
SQLITE_BENCHMARKS = ("observer", "journal", "replay", "live", "browser")
POSTGRES_BENCHMARKS = ("journal",)


def _suite(label: str, database_url: str, redis_url: str, names: tuple[str, ...], args, machine: dict) -> None:
    command = [
        sys.executable,
        "-m",
        "bench.suite",
        "--database",
        label,
        "--database-url",
        database_url,
        "--redis-url",
        redis_url,
        "--output",
        str(args.output),
        "--benchmarks",
        ",".join(names),
        "--sizes",
        QUICK_SIZES if args.quick else FULL_SIZES,
        "--repeats",
        str(QUICK_REPEATS if args.quick else REPEATS),
        "--machine",
        json.dumps(machine),
    ]
    if args.quick:
        command.append("--quick")
    subprocess.run(command, cwd=ROOT, check=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bin/bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="1k items, SQLite only: a smoke run of the suite")
    parser.add_argument("--output", type=Path, help="directory for the JSON results (default bench/results)")
    parser.add_argument("--only", help=f"comma-separated subset of {', '.join(BENCHMARKS)}")
    parser.add_argument("--no-postgres", action="store_true", help="skip PostgreSQL even in a full run")
    args = parser.parse_args(argv)
    if args.output is None:
        args.output = RESULTS_DIR / "quick" if args.quick else RESULTS_DIR
    args.output.mkdir(parents=True, exist_ok=True)
    wanted = set(args.only.split(",")) if args.only else set(BENCHMARKS)
    use_postgres = not (args.quick or args.no_postgres) and postgres.available() and "journal" in wanted

    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        redis = RedisServer().start()
        stack.callback(redis.stop)
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="harness-bench-")))
        cluster = stack.enter_context(postgres.temporary_cluster()) if use_postgres else None
        machine = describe(cluster.version if cluster else None)
        names = tuple(name for name in SQLITE_BENCHMARKS if name in wanted)
        _suite("sqlite", f"sqlite:///{scratch / 'bench.sqlite3'}", redis.url, names, args, machine)
        if cluster is not None:
            _suite("postgresql", cluster.url, redis.url, POSTGRES_BENCHMARKS, args, machine)
    elapsed = time.monotonic() - started
    markdown = ROOT / "BENCHMARKS.md" if args.output == RESULTS_DIR else args.output / "BENCHMARKS.md"
    markdown.write_text(render(args.output, total_seconds=elapsed))
    print(f"==> done in {elapsed:.0f}s; table in {markdown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
