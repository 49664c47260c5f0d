"""Replay recorded executions with the current agent definition, no model and no side effects."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from django.utils import timezone

from runs.models import Execution, ExecutionStatus, Team
from runs.services.lifecycle import bundle_import
from runs.services.store.bundle_format import BundleError
from runs.services.timeline import redactor_for
from runs.services.worker.replay import ReplayOutcome, ReplayRefused, replay_execution

DIVERGED = 3


class _Discard(Exception):
    """Rolls back a bundle's temporary copy and its replays."""


class Command(BaseCommand):
    help = (
        "Replay EXECUTION (its primary key) with the current agent definition: model requests answered from its "
        "journal's recorded responses, tool calls from its recorded results. Stores the replay as a new execution "
        f'marked "replay of #N" and exits {DIVERGED} at the first divergence.'
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("execution", type=int, nargs="?", help="the execution's primary key")
        parser.add_argument("--profile", help="replay with this profile of the execution's team (default: its own)")
        parser.add_argument("--all", action="store_true", help="replay every completed execution (with --since)")
        parser.add_argument("--since", type=datetime.date.fromisoformat, help="with --all: created on or after DATE")
        parser.add_argument("--bundle", type=Path, help="replay the root execution of a full run bundle")
        parser.add_argument("--team", help="with --bundle: the team its temporary copy goes into (default: default)")
        parser.add_argument("--accept-unsigned", action="store_true", help="with --bundle: as harness_import's")

    def handle(self, *args: Any, execution: int | None, **options: Any) -> None:
        chosen = [execution is not None, options["all"], options["bundle"] is not None]
        if sum(chosen) != 1:
            raise CommandError("Name one execution, or --all --since DATE, or --bundle FILE.")
        if options["all"] and options["since"] is None:
            raise CommandError("--all needs --since DATE (YYYY-MM-DD).")
        if options["bundle"] is not None:
            outcomes = self._from_bundle(options["bundle"], options)
        elif options["all"]:
            outcomes = self._many(options["since"], options["profile"])
        else:
            assert execution is not None  # the one choice left
            found = Execution.objects.select_related("thread__profile", "thread__team").filter(pk=execution).first()
            if found is None:
                raise CommandError(f"There is no execution {execution}.")
            outcomes = [self._one(found, options["profile"])]
        diverged = [outcome for outcome in outcomes if not outcome.equal]
        if diverged:
            raise CommandError(f"{len(diverged)} of {len(outcomes)} replays diverged.", returncode=DIVERGED)

    def _one(self, original: Execution, profile: str | None) -> ReplayOutcome:
        try:
            outcome = replay_execution(original, profile=profile)
        except ReplayRefused as exc:
            raise CommandError(f"Nothing was replayed: {exc}.") from exc
        # The divergence quotes prompts and tool results: masked as the pages show them.
        self.stdout.write(redactor_for(outcome.replay.policy_version).text(outcome.summary()))
        return outcome

    def _many(self, since: datetime.date, profile: str | None) -> list[ReplayOutcome]:
        start = timezone.make_aware(datetime.datetime.combine(since, datetime.time()))
        recorded = (
            Execution.objects.filter(created_at__gte=start, status=ExecutionStatus.COMPLETED, replay_of=None)
            .select_related("thread__profile", "thread__team")
            .order_by("pk")
        )
        outcomes = [self._one(original, profile) for original in recorded]
        self.stdout.write(f"{len(outcomes)} replayed, {sum(not o.equal for o in outcomes)} diverged.")
        return outcomes

    def _from_bundle(self, path: Path, options: dict[str, Any]) -> list[ReplayOutcome]:
        team = Team.objects.filter(name=options["team"] or "default").first()
        if team is None:
            raise CommandError(f"There is no team {options['team']!r}.")
        outcomes: list[ReplayOutcome] = []
        try:
            # The copy exists only for the replay: both are rolled back once the outcome is known.
            with transaction.atomic(), path.open("rb") as source:
                transfer = bundle_import.import_bundle(source, team=team, accept_unsigned=options["accept_unsigned"])
                assert transfer.execution is not None
                outcomes.append(self._one(transfer.execution, options["profile"]))
                raise _Discard
        except _Discard:
            self.stdout.write("The bundle's temporary copy and its replay were not kept.")
        except OSError as exc:
            raise CommandError(f"Cannot read {path}: {exc}.") from exc
        except BundleError as exc:
            raise CommandError(f"Nothing was replayed: {exc}.") from exc
        return outcomes
