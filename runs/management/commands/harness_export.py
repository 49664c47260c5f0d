"""Export an execution's tree (its thread, executions, runs, Host-managed children, decisions) as a run bundle."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from runs.models import BundleMode, Execution
from runs.services.lifecycle import bundle_export
from runs.services.store.bundle_format import BundleError


class Command(BaseCommand):
    help = (
        "Write the run bundle of EXECUTION (its primary key) to PATH: redacted (the timeline and masked values, safe "
        "to share) or full (the journal and checkpoints with real values). Every export is recorded."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("execution", type=int, help="the execution's primary key (as in /executions/<pk>/)")
        parser.add_argument("--output", "-o", type=Path, required=True, metavar="PATH", help="the bundle file to write")
        parser.add_argument("--mode", choices=BundleMode.values, default=BundleMode.REDACTED)

    def handle(self, *args: Any, execution: int, output: Path, mode: str, **options: Any) -> None:
        found = Execution.objects.select_related("thread").filter(pk=execution).first()
        if found is None:
            raise CommandError(f"There is no execution {execution}.")
        if output.exists():
            raise CommandError(f"{output} exists; name a new file.")
        try:
            with output.open("xb") as target:
                transfer = bundle_export.export_bundle(found, target, mode=BundleMode(mode))
        except BundleError as exc:
            output.unlink(missing_ok=True)
            raise CommandError(f"Nothing was exported: {exc}.") from exc
        self.stdout.write(
            f"Exported a {transfer.mode} bundle of {found} to {output} ({output.stat().st_size} bytes, manifest "
            f"{transfer.manifest_sha256[:12]})."
        )
