"""The sweeper's side of the retention benchmark, in a process of its own as the sweeper is in production.

`python -m bench.retention_sweeper <max chunks>` sets Django up on the database and Redis the environment names
(`DATABASE_URL`, `REDIS_URL`, as the suite process set them), prints `READY`, then for every line `pass` on its
input runs one retention pass as the sweeper does (`retention.run_pass(max_chunks=...)`) and prints a JSON line:
its wall seconds, what it deleted, how many transactions it committed and the longest of them (from its first
statement to the end of its commit: as long as it held SQLite's write lock, or its row locks on PostgreSQL) with
the start of its first statement.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ("main",)

# How much of the longest transaction's first statement a pass reports (which kind of transaction it was).
SQL_SHOWN = 120


@dataclass
class _Transactions:
    """Times each committed transaction of this connection, from its first statement to its commit."""

    committed: int = 0
    longest: float = 0.0
    longest_first_sql: str = ""
    started: float | None = None
    first_sql: str = ""

    def wrap(self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: dict[str, Any]) -> Any:
        from django.db import connection, transaction

        if not connection.in_atomic_block:
            # A transaction that began and never committed was rolled back: it is not a commit to time.
            self.started = None
        elif self.started is None:
            self.started, self.first_sql = time.perf_counter(), sql[:SQL_SHOWN]
            transaction.on_commit(self._commit)
        return execute(sql, params, many, context)

    def _commit(self) -> None:
        if self.started is not None:
            self.committed += 1
            took = time.perf_counter() - self.started
            if took > self.longest:
                self.longest, self.longest_first_sql = took, self.first_sql
            self.started = None


def _one_pass(max_chunks: int) -> dict[str, Any]:
    from django.db import connection

    from runs.services.recovery import retention

    transactions = _Transactions()
    with connection.execute_wrapper(transactions.wrap):
        began = time.perf_counter()
        report = retention.run_pass(max_chunks=max_chunks)
        wall = time.perf_counter() - began
    return {
        "wall_s": wall,
        **asdict(report),
        "transactions": transactions.committed,
        "longest_transaction_ms": transactions.longest * 1000,
        "longest_transaction_began_with": transactions.longest_first_sql,
    }


def main(argv: list[str]) -> int:
    max_chunks = int(argv[0])
    from .host import configure

    configure(os.environ["DATABASE_URL"], os.environ["REDIS_URL"])
    print("READY", flush=True)
    for line in sys.stdin:
        if line.strip() != "pass":
            raise SystemExit(f"unknown command {line.strip()!r}")
        print(json.dumps(_one_pass(max_chunks)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
