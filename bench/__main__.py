"""`bin/bench [--quick]`: start Redis (and a temporary PostgreSQL), run every benchmark, write the table.

The full run measures 1k, 10k and 100k item runs on SQLite (the journal, group commit, many runs on one worker
and retention over 1,000,000 events also on PostgreSQL, and the executions list at 100,000 executions on
PostgreSQL only) and rewrites BENCHMARKS.md from its results alone; `--only` writes bench/results/partial/ and its
own table there, so BENCHMARKS.md is never stitched from several runs; `--quick` measures only 1k items (fewer for
the live run), 3 repetitions, SQLite only (the executions list at a tiny size), as a smoke test of the suite
itself: its figures are not to be quoted.
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
from typing import Any

from tests.support.services import RedisServer

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
SQLITE_BENCHMARKS = (
    "hosting",
    "observer",
    "journal",
    "replay",
    "live",
    "viewers",
    "browser",
    "concurrency",
    "group_commit",
    "bundles",
    "model_replay",
    "retention",
    "webhooks",
)
POSTGRES_BENCHMARKS = ("journal", "group_commit", "execution_list", "concurrency", "retention")
# Measured on PostgreSQL only (100,000 executions); `--quick`, which starts no PostgreSQL, runs them on SQLite at a
# tiny size so the suite's smoke run still covers them.
POSTGRES_ONLY = frozenset({"execution_list"})
# Hundreds of websocket clients, or a hundred paced executions, are no smoke test: `--quick` leaves these out
# unless `--only` names them.
FULL_ONLY = frozenset({"viewers", "concurrency"})
# redis-py 8 reads with a 5 s socket timeout, the same as channels-redis's blocking BZPOPMIN: a consumer whose
# channel stays idle that long (e.g. during a long replay) can lose the race and die with close code 1011.
# The benchmarks raise the timeout so they can measure at all; see bench/findings.md.
REDIS_SOCKET_TIMEOUT = 30


def _suite(
    label: str,
    database_url: str,
    redis_url: str,
    names: tuple[str, ...],
    args: argparse.Namespace,
    machine: dict[str, Any],
    scratch: Path,
) -> None:
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
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "BENCH_CACHE_DIR": str(scratch)}
    subprocess.run(command, cwd=ROOT, check=True, env=env)


def _cpu_seconds() -> float:
    """CPU time of this process and its finished children (the suites, daphne, clients): the load we caused."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bin/bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="1k items, SQLite only: a smoke run of the suite")
    parser.add_argument("--output", type=Path, help="directory for the JSON results (default bench/results)")
    parser.add_argument("--only", help=f"comma-separated subset of {', '.join(BENCHMARKS)}")
    parser.add_argument("--no-postgres", action="store_true", help="skip PostgreSQL even in a full run")
    parser.add_argument("--table-only", action="store_true", help="only re-render the table from the JSON results")
    args = parser.parse_args(argv)
    if args.output is None:
        # BENCHMARKS.md is only ever one whole run at one commit: a smoke or partial run writes its own table.
        args.output = RESULTS_DIR / ("quick" if args.quick else "partial") if args.quick or args.only else RESULTS_DIR
    markdown = ROOT / "BENCHMARKS.md" if args.output == RESULTS_DIR else args.output / "BENCHMARKS.md"
    if args.table_only:
        markdown.write_text(render(args.output))
        return 0
    args.output.mkdir(parents=True, exist_ok=True)
    for stale in args.output.glob("*.json"):
        stale.unlink()
    wanted = set(args.only.split(",")) if args.only else set(BENCHMARKS) - (FULL_ONLY if args.quick else set())
    use_postgres = not (args.quick or args.no_postgres) and bool(wanted & set(POSTGRES_BENCHMARKS))
    if use_postgres and not postgres.available():
        print(
            "==> PostgreSQL is not installed (/usr/lib/postgresql/*/bin/initdb): the journal runs on SQLite only, "
            f"{', '.join(sorted(POSTGRES_ONLY & wanted)) or 'nothing else'} not at all"
        )
        use_postgres = False

    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        redis = RedisServer().start()
        stack.callback(redis.stop)
        redis_url = f"{redis.url}?socket_timeout={REDIS_SOCKET_TIMEOUT}"
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="harness-bench-")))
        cluster = stack.enter_context(postgres.temporary_cluster()) if use_postgres else None
        machine = describe(cluster.version if cluster else None)
        on_sqlite = SQLITE_BENCHMARKS + (tuple(sorted(POSTGRES_ONLY)) if args.quick else ())
        names = tuple(name for name in on_sqlite if name in wanted)
        if names:
            _suite("sqlite", f"sqlite:///{scratch / 'bench.sqlite3'}", redis_url, names, args, machine, scratch)
        if cluster is not None:
            on_postgres = tuple(name for name in POSTGRES_BENCHMARKS if name in wanted)
            _suite("postgresql", cluster.url, redis_url, on_postgres, args, machine, scratch)
    elapsed = time.monotonic() - started
    (args.output / "run.json").write_text(json.dumps({"total_seconds": elapsed, "cpu": _cpu_seconds()}) + "\n")
    markdown.write_text(render(args.output))
    print(f"==> done in {elapsed:.0f}s; table in {markdown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
