"""Run the recovery sweep once, or forever every few seconds (the sweeper process of `bin/run`)."""

from __future__ import annotations

import fcntl
import logging
import os
import time
from pathlib import Path
from typing import IO, Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection
from redis.exceptions import RedisError

from runs.services.recovery import recovery, retention, sweeper_passes

log = logging.getLogger(__name__)


def sole_sweeper_on_sqlite() -> IO[str] | None:
    """On SQLite, hold a lock beside the database file for as long as this process sweeps; refuse a second sweeper.

    SQLite cannot lock single rows (`select_for_update` is a no-op), so two sweepers could both start a recovery
    run for one execution. PostgreSQL sweepers lock rows and skip the ones another sweeper holds instead.
    The returned file keeps the lock; closing it (or exiting) releases it.
    """
    if connection.vendor != "sqlite":
        return None
    path = Path(f"{connection.settings_dict['NAME']}.sweeper.lock")
    handle = path.open("a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "unknown"
        handle.close()
        raise CommandError(
            f"Another sweeper (pid {holder}) already sweeps this SQLite database ({path.with_suffix('')}); "
            "SQLite cannot lock single rows, so only one sweeper may run. Use PostgreSQL for several sweepers."
        ) from None
    handle.truncate(0)
    handle.write(str(os.getpid()))
    handle.flush()
    return handle


class Command(BaseCommand):
    help = "Find runs whose worker died (expired lease), close their timeline lanes and start recovery runs."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--loop", type=float, metavar="SECONDS", help="sweep again every SECONDS until stopped (Ctrl-C)"
        )

    def handle(self, *args: Any, loop: float | None = None, **options: Any) -> None:
        lock = sole_sweeper_on_sqlite()
        try:
            if loop is None:
                self.stdout.write(f"sweep: {recovery.sweep()}")
                return
            self.stdout.write(f"sweeping every {loop:g}s")
            # The first retention pass waits one interval: a restarted sweeper recovers runs first.
            retention_due = time.monotonic() + settings.HARNESS_RETENTION_INTERVAL_SECONDS
            while True:
                self._pass()
                if time.monotonic() >= retention_due:
                    self._retention_pass()
                    retention_due = time.monotonic() + settings.HARNESS_RETENTION_INTERVAL_SECONDS
                time.sleep(loop)
        except KeyboardInterrupt:
            self.stdout.write("sweeper stopped")
        finally:
            if lock is not None:
                lock.close()

    def _pass(self) -> None:
        # A pass ends early when the database or Redis is unreachable; the next one tries the same rows again.
        try:
            report = recovery.sweep()
        except Exception as error:
            log.exception("sweep pass failed")
            self.stderr.write(f"sweep pass failed, retrying in the next pass: {type(error).__name__}: {error}")
            return
        if any(vars(report).values()):
            self.stdout.write(f"sweep: {report}")
        try:
            sweeper_passes.record_pass()
        except RedisError as error:
            log.warning("could not note the sweep pass for /health/: %s", error)

    def _retention_pass(self) -> None:
        # At most a few chunks a pass, so recovery is never late by more than that; the next pass goes on.
        try:
            report = retention.run_pass(max_chunks=settings.HARNESS_RETENTION_CHUNKS_PER_PASS)
        except Exception as error:
            log.exception("retention pass failed")
            self.stderr.write(f"retention pass failed, retrying in the next one: {type(error).__name__}: {error}")
            return
        if any(vars(report).values()):
            self.stdout.write(f"retention: {report}")
