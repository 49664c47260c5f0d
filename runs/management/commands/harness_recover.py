"""Run the recovery sweep once, or forever every few seconds (the Procfile's `sweeper`)."""

from __future__ import annotations

import time

from django.core.management.base import BaseCommand

from runs.services import recovery


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
                report = recovery.sweep()
                if any(vars(report).values()):
                    self.stdout.write(f"sweep: {report}")
                time.sleep(loop)
        except KeyboardInterrupt:
            self.stdout.write("sweeper stopped")
