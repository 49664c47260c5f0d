"""Run one retention pass to the end, or show what it would delete (`--dry-run`)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.template.defaultfilters import filesizeformat

from runs.services.recovery import estimate, retention


class Command(BaseCommand):
    help = (
        "Purge the journal, timeline and checkpoints of finished executions older than their team policy's "
        "retention (held threads and executions are kept); --dry-run only counts them."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dry-run", action="store_true", help="count what a pass would delete; delete nothing")

    def handle(self, *args: Any, dry_run: bool = False, **options: Any) -> None:
        if dry_run:
            found = estimate()
            self.stdout.write(
                f"would purge {found.executions} executions: {found.timeline_events} timeline events, "
                f"{found.journal_entries} journal entries, {found.checkpoints} checkpoints, "
                f"about {filesizeformat(found.bytes)} ({found.bytes} bytes) of stored payloads"
            )
            return
        self.stdout.write(f"retention: {retention.run_pass()}")
