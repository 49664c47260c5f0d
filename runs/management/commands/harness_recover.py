"""Run the recovery sweep once, or forever every few seconds (the sweeper process of `bin/run`)."""

from __future__ import annotations

import logging
import time

from django.core.management.base import BaseCommand

from runs.services import recovery

log = logging.getLogger(__name__)


class Command(BaseCommand):
    help = "Find runs whose worker died (expired lease), close their timeline lanes and start recovery runs."

    def add_arguments(self, parser):
        parser.add_argument(
            "--loop", type=float, metavar="SECONDS", help="sweep again every SECONDS until stopped (Ctrl-C)"
        )

    def handle(self, *args, loop: float | None = None, **options):
        if loop is None:
            self.stdout.write(f"sweep: {recovery.sweep()}")
            return
        self.stdout.write(f"sweeping every {loop:g}s")
        try:
            while True:
                self._pass()
                time.sleep(loop)
        except KeyboardInterrupt:
            self.stdout.write("sweeper stopped")

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
