"""The concurrent worker on real processes: many runs on one worker's event loop, and its faults.

Each test has a redis-server of its own, so only the worker it starts takes its jobs, and every run follows
`tests.support.paced_model` (each model call waits, then streams 50 deltas; three calls per run).
"""

from __future__ import annotations

import gc
import itertools
import signal
import time
from datetime import datetime

import pytest
import redis
from django.utils import timezone
from rq import Queue
from rq.job import Job
from rq.registry import FailedJobRegistry, FinishedJobRegistry

from harness_site.settings import channel_layer_config
from runs.models import ACTIVE_EXECUTION_STATUSES, Execution, ExecutionStatus, Run, RunReason, RunStatus
from runs.services.lifecycle import executions
from runs.services.recovery import recovery
from runs.services.store.queued_jobs import SERIALIZER
from runs.worker import host_worker
from tests.support import factories, paced_model
from tests.support.host_runs import assert_contiguous
from tests.support.services import RedisServer, RQWorker, running, service_env, wait_until

pytestmark = pytest.mark.services

PROFILE_NUMBERS = itertools.count()
PACED = {
    "HARNESS_TOOLSETS": "tests.support.paced_model.toolset",
    "HARNESS_DEMO_MODEL": "tests.support.paced_model.model",
}


@pytest.fixture
def paced(settings, transactional_db):
    """This test's redis-server, settings pointed at it, and the environment of a worker that runs the paced model."""
    server = RedisServer().start()
    settings.REDIS_URL = server.url
    settings.CHANNEL_LAYERS = {"default": channel_layer_config(server.url)}
    settings.RQ_QUEUES = {"default": {"URL": server.url, "DEFAULT_TIMEOUT": 600}}
    settings.HARNESS_TOOLSETS = [PACED["HARNESS_TOOLSETS"]]
    settings.HARNESS_DEMO_MODEL = PACED["HARNESS_DEMO_MODEL"]
    settings.HARNESS_RECOVERY_BACKOFF_SECONDS = 0.2
    try:
        yield service_env(redis_url=server.url, database_name=settings.DATABASES["default"]["NAME"]) | PACED
    finally:
        server.stop()


def start(count: int, prompt: str) -> list[Execution]:
    profile = factories.profile(name=f"paced {next(PROFILE_NUMBERS)}", model="demo", tools=paced_model.TOOLS)
    return [
        executions.start_execution(executions.create_thread(profile, title=f"{prompt} {number}"), prompt)
        for number in range(count)
    ]


def settle(started: list[Execution], *, timeout: float, worker: RQWorker) -> None:
    """Sweep (as the sweeper process would) until none of these executions is active any more."""
    pks = [execution.pk for execution in started]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        recovery.sweep()
        if not Execution.objects.filter(pk__in=pks, status__in=ACTIVE_EXECUTION_STATUSES).exists():
            return
        time.sleep(0.3)
    states = sorted(Execution.objects.filter(pk__in=pks).values_list("status", flat=True))
    raise AssertionError(f"executions did not settle in {timeout}s: {states}\n{worker.log()[-5000:]}")


def leased() -> int:
    return Run.objects.filter(status=RunStatus.RUNNING, lease_token__isnull=False).count()


def most_at_once(runs: list[Run]) -> int:
    """The largest number of these runs that were running at the same moment."""
    edges: list[tuple[datetime, int]] = []
    for run in runs:
        assert run.started_at is not None and run.finished_at is not None, f"run {run.pk} has not ended"
        edges += [(run.started_at, 1), (run.finished_at, -1)]
    at_once = most = 0
    for _, step in sorted(edges, key=lambda edge: (edge[0], edge[1])):
        at_once += step
        most = max(most, at_once)
    return most


def connection() -> redis.Redis:
    from django.conf import settings

    return redis.Redis.from_url(settings.REDIS_URL)


def test_fifty_runs_share_one_worker_and_complete_with_contiguous_timelines(paced):
    started = start(50, "wait 2")
    with running(RQWorker(paced)) as worker:
        settle(started, timeout=300, worker=worker)

    runs = list(Run.objects.filter(execution__in=started))
    assert len(runs) == 50 and {run.status for run in runs} == {RunStatus.COMPLETED}
    for execution in started:
        assert_contiguous(execution)
    # Each run waited 6 s on its model: one process per run would have run them one after another.
    assert most_at_once(runs) >= 10
    # Still one RQ job per execution, each finished by the one worker.
    finished = FinishedJobRegistry("default", connection=connection(), serializer=SERIALIZER)
    assert len(finished.get_job_ids()) == 50
    jobs = Job.fetch_many(finished.get_job_ids(), connection=connection(), serializer=SERIALIZER)
    assert len({job.worker_name for job in jobs if job is not None}) == 1


def test_killing_a_worker_that_holds_many_runs_recovers_every_run_exactly_once(paced):
    factories.configure_policy(lease_seconds=5, max_attempts=10)
    started = start(50, "wait 1")
    worker = RQWorker(paced).start()
    try:
        wait_until(lambda: leased() >= 25, timeout=120, what="25 runs in flight on the worker")
        worker.kill()
        worker = RQWorker(paced).start()
        settle(started, timeout=300, worker=worker)
    finally:
        worker.stop()

    assert set(Execution.objects.filter(pk__in=[e.pk for e in started]).values_list("status", flat=True)) == {
        ExecutionStatus.COMPLETED
    }
    abandoned = list(Run.objects.filter(execution__in=started, status=RunStatus.ABANDONED))
    assert len(abandoned) >= 25
    for dead in abandoned:
        successor = Run.objects.get(previous_run=dead)
        # A recovery run may be abandoned in turn (its lease lapsing while 50 runs start at once on a busy machine).
        assert successor.reason == RunReason.RECOVERY and (dead.run_id is None or successor.run_id != dead.run_id)
        last = dead.timeline.order_by("-position").first()
        assert last is None or last.event_type == "RUN_ERROR"
    for execution in started:
        assert_contiguous(execution)


def test_sigterm_stops_taking_jobs_and_lets_the_runs_in_flight_finish(paced):
    first = start(10, "wait 1")
    worker = RQWorker(paced | {"HARNESS_WORKER_GRACE_SECONDS": "120"}).start()
    try:
        queue = Queue("default", connection=connection(), serializer=SERIALIZER)
        wait_until(lambda: leased() == 10 and queue.count == 0, timeout=60, what="every run taken by the worker")
        worker.process.send_signal(signal.SIGTERM)
        wait_until(lambda: "stopping; taking no more jobs" in worker.log(), timeout=30, what="the worker stopping")
        later = start(3, "wait 1")
        worker.process.wait(timeout=120)
    finally:
        worker.stop()

    for execution in first:
        assert [run.status for run in execution.runs.all()] == [RunStatus.COMPLETED]
        assert_contiguous(execution)
    assert {run.status for run in Run.objects.filter(execution__in=later)} == {RunStatus.QUEUED}
    assert queue.count == 3


def test_after_the_grace_period_a_stopping_worker_gives_its_leases_up_for_recovery_at_once(paced):
    factories.configure_policy(lease_seconds=120, max_attempts=10)
    started = start(5, "wait 30")
    worker = RQWorker(paced | {"HARNESS_WORKER_GRACE_SECONDS": "1"}).start()
    try:
        wait_until(lambda: leased() == 5, timeout=60, what="every run in flight")
        worker.process.send_signal(signal.SIGTERM)
        worker.process.wait(timeout=60)
    finally:
        worker.stop()

    assert "giving up their leases" in worker.log()
    # A lease of 120 s that was not given up would still be current here.
    runs = Run.objects.filter(execution__in=started)
    assert all(run.lease_expires_at <= timezone.now() for run in runs)
    assert recovery.sweep().abandoned == 5
    recovering = Run.objects.filter(execution__in=started, reason=RunReason.RECOVERY)
    wait_until(lambda: recovery.sweep() and recovering.count() == 5, timeout=30, what="a recovery run for each")
    # Each job ended in RQ's failed registry, stopped with its worker.
    failed = FailedJobRegistry("default", connection=connection(), serializer=SERIALIZER)
    assert len(failed.get_job_ids()) == 5


def test_an_exception_in_one_run_leaves_the_others_untouched(paced):
    calm = start(10, "wait 1")
    exploding = start(1, "explode")[0]
    garbage = Queue("default", connection=connection(), serializer=SERIALIZER).enqueue(
        "runs.jobs.execute_run", "1 or 1=1"
    )
    with running(RQWorker(paced)) as worker:
        settle([*calm, exploding], timeout=180, worker=worker)
        # The worker goes on taking jobs after all of it.
        after = start(1, "wait 0.1")
        settle(after, timeout=60, worker=worker)
        assert worker.running

    exploding.refresh_from_db()
    assert exploding.status == ExecutionStatus.FAILED
    for execution in [*calm, *after]:
        execution.refresh_from_db()
        assert execution.status == ExecutionStatus.COMPLETED
        assert_contiguous(execution)
    failed = FailedJobRegistry("default", connection=connection(), serializer=SERIALIZER)
    assert garbage.id in failed.get_job_ids()


def test_the_worker_freezes_what_it_loaded_and_collects_young_garbage_less_often():
    threshold = gc.get_threshold()
    loaded = ["made before the first job"]
    try:
        host_worker.settle_heap()

        assert gc.get_threshold() == (host_worker.YOUNG_COLLECTION_THRESHOLD, *threshold[1:])
        # Frozen: no collection walks it again, however full.
        assert gc.get_freeze_count() > 0 and not any(found is loaded for found in gc.get_objects())
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)
