"""Fill the dashboard with demo executions on the offline scripted agent (run `bin/run` first).

Most executions are queued for the RQ worker. One is started right here and stopped dead after a few
checkpoints, as if its worker had been killed: once its lease expires the sweeper (`harness_recover`, the
`sweeper` of `bin/run`) closes its lane and a recovery run on the worker finishes it.
"""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from runs.demo_profile import ensure_demo_profile
from runs.demo_team import DEMO_TEAM, VIEWER_PASSWORD, VIEWER_USERNAME, ensure_demo_team
from runs.models import ACTIVE_EXECUTION_STATUSES, Execution, ExecutionTrigger
from runs.services.lifecycle import executions
from runs.services.store import queueing
from runs.services.worker import runner

PROMPTS = (
    ("Record lookup", "Please look up REC-42 and search for related records."),
    ("Research", "Research why the nightly export was slow."),
    ("Deployment (needs approval)", "Deploy release 1.4.2 to production."),
    ("Question for the operator", "Ask the operator which environment to use."),
    ("Guided tour", "Give me the tour."),
)
CRASHED = ("Recovered after a crash", "Look up the record, then do the slow 2 second step.")
CRASH_AFTER_BOUNDARIES = 4


class SimulatedCrash(BaseException):
    """Ends the run loop abruptly, as kill -9 would: no result, the lease left to expire."""


class CrashAfter:
    """A boundary hook that crashes the run after `boundaries` stored checkpoints."""

    def __init__(self, boundaries: int) -> None:
        self.left = boundaries

    def __call__(self) -> None:
        self.left -= 1
        if self.left <= 0:
            raise SimulatedCrash


class Command(BaseCommand):
    help = "Create the demo profile and start demo executions, one of them recovered after a simulated crash."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--wait", type=float, default=0, metavar="SECONDS", help="wait until every demo execution settled"
        )

    def handle(self, *args: Any, wait: float = 0, **options: Any) -> None:
        profile = ensure_demo_profile()
        started: list[Execution] = []
        with queueing.reporting() as dispatch:
            for title, prompt in PROMPTS:
                thread = executions.create_thread(profile, title=title)
                started.append(executions.start_execution(thread, prompt, trigger=ExecutionTrigger.DEMO))
                self.stdout.write(f"queued: {title}")
            # One execution in a second team, which the user `viewer` sees alone (and `operator` sees as well).
            research = executions.create_thread(ensure_demo_team(), title="Research team: summary")
            started.append(executions.start_execution(research, PROMPTS[0][1], trigger=ExecutionTrigger.DEMO))
            self.stdout.write(
                f"queued: {research.title} (team {DEMO_TEAM}; log in as {VIEWER_USERNAME}/{VIEWER_PASSWORD})"
            )
        if dispatch.queue_unreachable:
            self.stderr.write(queueing.UNREACHABLE_NOTICE)

        title, prompt = CRASHED
        thread = executions.create_thread(profile, title=title)
        # This process plays the worker that dies, so no worker is sent the run's job.
        with queueing.held_back():
            crashed = executions.start_execution(thread, prompt, trigger=ExecutionTrigger.DEMO)
        run = crashed.runs.get()
        try:
            outcome = runner.execute_run(run.pk, after_boundary=CrashAfter(CRASH_AFTER_BOUNDARIES))
        except SimulatedCrash:
            outcome = "crashed (simulated): the lease will expire"
        lease_seconds = crashed.policy_version.lease_seconds
        self.stdout.write(f"{title}: {outcome}; the sweeper recovers it about {lease_seconds}s from now")
        started.append(crashed)

        if wait:
            self._wait(started, wait)

    def _wait(self, started: list[Execution], seconds: float) -> None:
        deadline = time.monotonic() + seconds
        pending = {execution.pk for execution in started}
        while pending and time.monotonic() < deadline:
            active = Execution.objects.filter(pk__in=pending, status__in=ACTIVE_EXECUTION_STATUSES)
            pending = set(active.exclude(status="waiting").values_list("pk", flat=True))
            time.sleep(0.5)
        for execution in Execution.objects.filter(pk__in=[e.pk for e in started]).select_related("thread"):
            self.stdout.write(f"{execution.thread.title}: {execution.status} ({execution.runs.count()} runs)")
