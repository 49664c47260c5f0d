"""Benchmark 9: the executions list at 100,000 executions, and a bulk approve of 1,000 waiting executions.

The list: executions are written in batches straight into the tables (not through the engine) as a realistic mix
(two teams, profiles, statuses with the active one last in its thread, failures with codes, starters, start times
over six months, tool calls, waiting executions with a pending request, some forked threads), with the project's
migrations and indexes applied. The subject is the real view (`/executions/`, through Django's test Client as a
logged-in member of one team), its server time for the first page and for a filtered page (waiting, one profile, a
text search), p50/p95 over the repetitions after a warm-up. The baseline is the same page's row query (the view's
queryset, ORM) cut by OFFSET at the middle of the same list: what a page deep in an OFFSET-paginated list costs.
The page's counts per status come from their own request (`/executions/counts/`, which the page's script fetches):
a row of its own for each page's filters, timed in turn with the page, against its own target.

The bulk approve: 1,000 waiting executions, each with one pending approval (made by the test factories through
the Host's checkpoint store), started with `bulk_operations.start` and its job run in this process
(`bulk_operations.run`); the figure is its throughput. The benchmark then fails loudly unless every item is done,
every execution has exactly one resume run, queued with a live job, and every request has exactly one decision.
"""

from __future__ import annotations

import contextlib
import functools
import random
import statistics
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

from .context import BenchContext
from .measure import Comparison, Report, Stats, Target, measure_interleaved, stopwatch
from .synthetic import SIZES

__all__ = ("run",)

P95_TARGET = Target("p95_ms", "<", 150.0, "p95 server time under 150 ms")
COUNTS_TARGET = Target("p95_ms", "<", 150.0, "counts under 150 ms p95")
REPEATS = 40
QUICK_REPEATS = 5
BULK_ITEMS = 1_000
QUICK_BULK_ITEMS = 10
QUICK_EXECUTIONS = 300
EXECUTIONS_PER_THREAD = 10
BATCH = 5_000
SPREAD = timedelta(days=180)
PROFILES = 8
STARTERS = ("ana", "bo", "chen", "dara", "eli")
FAILURE_CODES = ("model_error", "tool_error", "timeout", "lease_lost", "budget_exceeded")
TOOLS = ("send_payment", "lookup_customer", "search_docs", "delete_file", "create_ticket")
VERBS = ("refund", "summarise", "look up", "reconcile", "draft", "check", "escalate", "close")
OBJECTS = ("invoice", "order", "ticket", "contract", "shipment", "account", "payment", "report")
SEARCH = "refund"
FORK_SHARE = 0.02
OTHER_TEAM_SHARE = 0.2
# The status of a thread's last execution (the only one that may still be active) and of every earlier one.
LAST_MIX = {"completed": 50, "failed": 10, "cancelled": 5, "waiting": 25, "running": 6, "queued": 4}
EARLIER_MIX = {"completed": 85, "failed": 10, "cancelled": 5}
WAITING_KINDS = {"approval": 80, "question": 10, "external": 10}


def _pick(rng: random.Random, mix: dict[str, int]) -> str:
    return rng.choices(list(mix), weights=list(mix.values()))[0]


@contextlib.contextmanager
def _own_timestamps(model: Any) -> Iterator[None]:
    """Let bulk_create write `created_at` as given: the list is ordered by it, so it must span months."""
    field = model._meta.get_field("created_at")
    field.auto_now_add = False
    try:
        yield
    finally:
        field.auto_now_add = True


def _seed_list(total: int, rng: random.Random) -> tuple[Any, dict[str, Any]]:
    """`total` executions in the mix above; returns the viewer (an approver of the `default` team) and a summary."""
    from django.contrib.auth import get_user_model
    from django.db import transaction
    from django.utils import timezone

    from runs.models import (
        DEFAULT_TEAM,
        AgentProfile,
        Checkpoint,
        CheckpointKind,
        DeferredRequest,
        Execution,
        Membership,
        Run,
        RunStatus,
        Team,
        TeamRole,
        Thread,
        ToolDispatch,
    )
    from runs.services.lifecycle import executions as lifecycle

    users = get_user_model().objects
    default, _ = Team.objects.get_or_create(name=DEFAULT_TEAM)
    other, _ = Team.objects.get_or_create(name="bench-other")
    viewer, _ = users.get_or_create(username="bench-lister")
    Membership.objects.update_or_create(user=viewer, team=default, defaults={"role": TeamRole.APPROVER})
    starters = [users.get_or_create(username=f"bench-{name}")[0] for name in STARTERS]
    versions = {team.pk: lifecycle.current_policy_version(team) for team in (default, other)}
    profiles = {
        team.pk: [
            AgentProfile.objects.get_or_create(name=f"bench-list-{team.name}-{n}", defaults={"team": team})[0]
            for n in range(PROFILES if team == default else 2)
        ]
        for team in (default, other)
    }

    now = timezone.now()
    starts = sorted(now - SPREAD * rng.random() for _ in range(total))
    thread_count = max(1, total // EXECUTIONS_PER_THREAD)
    owners = [rng.randrange(thread_count) for _ in range(total)]
    last_of = {owner: index for index, owner in enumerate(owners)}
    with transaction.atomic():
        teams = [other if rng.random() < OTHER_TEAM_SHARE else default for _ in range(thread_count)]
        threads = Thread.objects.bulk_create(
            (
                Thread(
                    thread_id=f"bench-list-{n:07d}",
                    title=f"{rng.choice(VERBS)} {rng.choice(OBJECTS)} {n}",
                    profile=rng.choice(profiles[team.pk]),
                    team=team,
                )
                for n, team in enumerate(teams)
            ),
            batch_size=BATCH,
        )
        numbers: Counter[int] = Counter()
        rows = []
        for index, (owner, started) in enumerate(zip(owners, starts, strict=True)):
            numbers[owner] += 1
            status = _pick(rng, LAST_MIX if last_of[owner] == index else EARLIER_MIX)
            shown = f"{rng.choice(VERBS)} the {rng.choice(OBJECTS)} of customer {rng.randrange(10_000)}"
            rows.append(
                Execution(
                    thread=threads[owner],
                    number=numbers[owner],
                    input=shown,
                    shown_input=shown,
                    status=status,
                    policy_version=versions[teams[owner].pk],
                    created_by=rng.choice(starters) if rng.random() < 0.7 else None,
                    created_at=started,
                    finished_at=started + timedelta(seconds=rng.randrange(2, 600))
                    if status in ("completed", "failed", "cancelled")
                    else None,
                    failure_code=rng.choice(FAILURE_CODES) if status == "failed" else "",
                    failure_message="the run failed" if status == "failed" else "",
                )
            )
        with _own_timestamps(Execution):
            made = Execution.objects.bulk_create(rows, batch_size=BATCH)
        run_status = {"waiting": RunStatus.SUSPENDED, "cancelled": RunStatus.CANCELLED}
        runs = Run.objects.bulk_create(
            (
                Run(
                    execution=execution,
                    number=1,
                    run_id=f"bench-list-run-{execution.pk}",
                    status=run_status.get(execution.status, execution.status),
                    policy_version=execution.policy_version,
                    started_at=execution.created_at,
                    finished_at=execution.finished_at,
                )
                for execution in made
            ),
            batch_size=BATCH,
        )
        ToolDispatch.objects.bulk_create(
            (
                ToolDispatch(run=run, tool_call_id=f"call-{run.pk}-{n}", tool_name=rng.choice(TOOLS))
                for run in runs
                if rng.random() < 0.3
                for n in range(rng.randint(1, 2))
            ),
            batch_size=BATCH,
        )
        # A checkpoint ends each waiting run (its requests' set) and each run a fork starts from.
        waiting = [run for run in runs if run.execution.status == "waiting"]
        sources = rng.sample(runs, int(thread_count * FORK_SHARE))
        checkpoints = Checkpoint.objects.bulk_create(
            (
                Checkpoint(thread=run.execution.thread, run=run, kind=CheckpointKind.TERMINAL, state_json="{}")
                for run in [*waiting, *sources]
            ),
            batch_size=BATCH,
        )
        for run, checkpoint in zip(waiting, checkpoints, strict=False):
            run.execution.thread.selected_checkpoint = checkpoint
        Thread.objects.bulk_update([run.execution.thread for run in waiting], ["selected_checkpoint"], batch_size=BATCH)
        forks = rng.sample(threads, len(sources))
        for thread, checkpoint in zip(forks, checkpoints[len(waiting) :], strict=True):
            thread.forked_from = checkpoint
        Thread.objects.bulk_update(forks, ["forked_from"], batch_size=BATCH)
        DeferredRequest.objects.bulk_create(
            (
                DeferredRequest(
                    execution=run.execution,
                    run=run,
                    checkpoint=checkpoint,
                    tool_call_id=f"call-wait-{run.pk}",
                    tool_name=rng.choice(TOOLS),
                    kind=_pick(rng, WAITING_KINDS),
                    args={"amount": rng.randrange(1, 10_000)},
                    reason="the policy asks a human",
                )
                for run, checkpoint in zip(waiting, checkpoints, strict=False)
            ),
            batch_size=BATCH,
        )
    statuses = Counter(execution.status for execution in made)
    return viewer, {
        "executions": len(made),
        "threads": thread_count,
        "visible_share": round(sum(t == default for t in teams) / thread_count, 3),
        "statuses": dict(statuses),
        "forked_threads": len(forks),
        "filtered_profile": profiles[default.pk][0].name,
    }


def _analyze() -> None:
    """Fresh planner statistics after the bulk load, as autovacuum would gather them on a live database."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")


def _timed_page(client: Any, path: str) -> float:
    with stopwatch() as elapsed:
        response = client.get(path)
    if response.status_code != 200:
        raise RuntimeError(f"{path} answered {response.status_code}")
    return elapsed()


def _row_query(viewer: Any, query: dict[str, str]) -> Any:
    """The view's row query for these filters, newest first (as `execution_page` builds it, without the key)."""
    from django.http import QueryDict

    from runs.forms import ExecutionFilterForm

    params = QueryDict(mutable=True)
    params.update(query)
    matching = ExecutionFilterForm(params, viewer=viewer).filters().matching()
    return matching.select_related("thread__profile", "created_by", "tombstone").defer("input")


def _offset_page(rows: Any, offset: int, size: int) -> float:
    with stopwatch() as elapsed:
        list(rows.order_by("-created_at", "-pk")[offset : offset + size])
    return elapsed()


def _percentile(samples: tuple[float, ...], share: float) -> float:
    return statistics.quantiles(samples, n=100, method="inclusive")[round(share * 100) - 1]


def _list_cases(report: Report, context: BenchContext, viewer: Any, size: str, summary: dict[str, Any]) -> None:
    from django.test import Client
    from django.urls import reverse

    from runs.views import EXECUTION_LIST_PAGE

    # A host the settings allow (the test Client's default `testserver` is not one outside the tests).
    client = Client(HTTP_HOST="localhost")
    client.force_login(viewer)
    pages = {
        "first page": {},
        "filtered page": {"status": "waiting", "profile": summary["filtered_profile"], "q": SEARCH},
    }
    for name, query in pages.items():
        filters = "?" + urlencode(query) if query else ""
        rows = _row_query(viewer, query)
        matches = rows.count()
        subject, counts, baseline = measure_interleaved(
            (
                functools.partial(_timed_page, client, reverse("runs:executions") + filters),
                functools.partial(_timed_page, client, reverse("runs:execution_counts") + filters),
                functools.partial(_offset_page, rows, matches // 2, EXECUTION_LIST_PAGE),
            ),
            report.repeats,
            warmup=2,
        )
        report.add(
            Comparison(
                name=f"list {name}",
                size=size,
                items=EXECUTION_LIST_PAGE,
                subject=subject,
                baseline=baseline,
                baseline_name="the same page's rows by OFFSET at the middle of the list (the view's queryset, ORM)",
                target=P95_TARGET,
                extra={
                    "query": query,
                    "matches": matches,
                    "page_rows": min(matches, EXECUTION_LIST_PAGE),
                    "p50_ms": _percentile(subject.samples, 0.50) * 1000,
                    "p95_ms": _percentile(subject.samples, 0.95) * 1000,
                    "baseline_p95_ms": _percentile(baseline.samples, 0.95) * 1000,
                    "data": summary,
                },
            )
        )
        report.add(
            Comparison(
                name=f"list counts {name}",
                size=size,
                items=1,
                subject=counts,
                baseline=None,
                baseline_name="",
                target=COUNTS_TARGET,
                extra={
                    "query": query,
                    "matches": matches,
                    "p50_ms": _percentile(counts.samples, 0.50) * 1000,
                    "p95_ms": _percentile(counts.samples, 0.95) * 1000,
                },
            )
        )


def _seed_waiting(count: int) -> list[int]:
    """`count` waiting executions, each with one pending approval, as the approval tests make them."""
    from pydantic_ai import ToolCallPart

    from tests.support import factories

    pks = []
    for n in range(count):
        call = ToolCallPart("send_payment", {"amount": 5 + n, "to": "acme"}, tool_call_id="call-pay")
        pks.append(factories.suspended_execution(approvals=(call,), title=f"bulk {n}").execution.pk)
    return pks


def _check_bulk(operation_pk: int, pks: list[int]) -> None:
    """Every item done, one queued resume run with a live job per execution, one decision per request."""
    from django.db.models import Count

    from runs.models import BulkItem, Decision, DeferredRequest, Run, RunReason, RunStatus
    from runs.services.store import queueing

    outcomes = Counter(BulkItem.objects.filter(operation_id=operation_pk).values_list("outcome", flat=True))
    if outcomes != Counter({"done": len(pks)}):
        raise RuntimeError(f"bulk approve: item outcomes {dict(outcomes)}, expected {len(pks)} done")
    resumes = list(Run.objects.filter(execution_id__in=pks, reason=RunReason.RESUME))
    per_execution = Counter(run.execution_id for run in resumes)
    if set(per_execution) != set(pks) or set(per_execution.values()) != {1}:
        raise RuntimeError(f"bulk approve: resume runs per execution {Counter(per_execution.values())}")
    if unqueued := [run.pk for run in resumes if run.status != RunStatus.QUEUED or queueing.job_missing(run)]:
        raise RuntimeError(f"bulk approve: {len(unqueued)} resume runs without a queued job, e.g. {unqueued[:5]}")
    decided = DeferredRequest.objects.filter(execution_id__in=pks).annotate(n=Count("decision"))
    if sorted(decided.values_list("n", flat=True)) != [1] * len(pks):
        raise RuntimeError("bulk approve: a request has no decision or more than one")
    keys = Counter(Decision.objects.filter(request__execution_id__in=pks).values_list("submission__key", flat=True))
    if len(keys) != len(pks) or set(keys.values()) != {1}:
        raise RuntimeError("bulk approve: decisions share a submission")


def _bulk_case(report: Report, context: BenchContext, viewer: Any) -> None:
    from runs.models import BulkAction
    from runs.services.lifecycle import bulk_operations
    from runs.services.store import queueing

    count = QUICK_BULK_ITEMS if context.quick else BULK_ITEMS
    with stopwatch() as seeding:
        pks = _seed_waiting(count)
    operation = bulk_operations.start(viewer, BulkAction.APPROVE, pks)
    with stopwatch() as elapsed:
        bulk_operations.run(operation.pk)
    _check_bulk(operation.pk, pks)
    # Queued to be checked, not run: later benchmarks share the queue.
    queueing.host_queue().empty()  # type: ignore[no-untyped-call]  # rq leaves it unannotated
    report.add(
        Comparison(
            name="bulk approve",
            size=f"{count:,}",
            items=count,
            subject=Stats.of([elapsed()]),
            baseline=None,
            baseline_name="",
            target=None,
            extra={"items_per_s": count / elapsed(), "seed_s": seeding(), "checked": True},
        )
    )


def run(context: BenchContext) -> Report:
    report = Report("execution_list", context.database, context.quick, QUICK_REPEATS if context.quick else REPEATS)
    size = "0.3k" if context.quick else context.largest
    rng = random.Random(31)
    viewer, summary = _seed_list(QUICK_EXECUTIONS if context.quick else SIZES[size], rng)
    _analyze()
    _list_cases(report, context, viewer, size, summary)
    _bulk_case(report, context, viewer)
    report.notes.append(
        "list: server time of GET /executions/ through Django's test Client (middleware, session, the filter "
        "form, the keyset page and the template), as a member of the team that sees about 80% of the executions; "
        "the figure is the p95 over the repetitions (p50 in the JSON). list counts: GET /executions/counts/ with "
        "the same filters (the counts per status the page's script fetches after it), timed in turn with the "
        "page. bulk approve: "
        "one operation over that many waiting executions, its job run in process; the benchmark fails unless "
        "every item is done with one queued resume run (its job in the queue) and one decision each."
    )
    return report
