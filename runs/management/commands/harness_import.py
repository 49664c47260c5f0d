"""Import a run bundle as a read-only copy, into a team of this Host; nothing is written unless all of it is."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from runs.models import DEFAULT_TEAM, Team
from runs.services.lifecycle import bundle_import
from runs.services.store.bundle_format import BundleError


class Command(BaseCommand):
    help = (
        "Import the run bundle at PATH as a read-only copy marked with the Host it came from. A bundle whose hashes "
        "or signature do not match, of a newer format, or whose ids collide with this Host's is refused whole."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", type=Path, help="the bundle file")
        parser.add_argument(
            "--team", default=DEFAULT_TEAM, help=f"the team the copy belongs to (default {DEFAULT_TEAM})"
        )
        parser.add_argument(
            "--accept-unsigned",
            action="store_true",
            help="import a bundle whose signature does not match this Host's key (its hashes are still checked)",
        )

    def handle(self, *args: Any, path: Path, team: str, accept_unsigned: bool, **options: Any) -> None:
        target = Team.objects.filter(name=team).first()
        if target is None:
            raise CommandError(f"There is no team {team!r}.")
        try:
            with path.open("rb") as source:
                transfer = bundle_import.import_bundle(source, team=target, accept_unsigned=accept_unsigned)
        except OSError as exc:
            raise CommandError(f"Cannot read {path}: {exc.strerror}.") from exc
        except BundleError as exc:
            raise CommandError(f"Nothing was imported: {exc}.") from exc
        signed = "" if transfer.signed else " (unsigned, as asked)"
        self.stdout.write(
            f"Imported a {transfer.mode} bundle from {transfer.host}{signed} into team {target}: execution "
            f"{transfer.execution_id}."
        )
