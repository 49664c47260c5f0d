"""Jobs travel as JSON and the worker runs only the Host's own: whatever else is written into Redis (a pickle that
runs code as it loads, garbage, another function, a job of ours with a forged argument) fails without running, with
one log line each, and the worker goes on to run the next real execution."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import redis
from rq import Queue
from rq.job import JobStatus
from rq.serializers import JSONSerializer

from runs.models import ExecutionStatus
from runs.services.lifecycle import executions
from runs.services.store import queueing
from runs.services.store.queued_jobs import HostJob
from tests.support import factories
from tests.support.services import wait_until


def leave_marker(path: str) -> None:
    Path(path).write_text("this ran in the worker")


class Gadget:
    """Pickled, it says "call leave_marker(path)": unpickling it runs that call."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (leave_marker, (self.path,))


def test_a_run_s_job_is_json_naming_the_job_and_the_run(redis_settings, db):
    assert queueing.send_job(42)
    stored = redis.Redis.from_url(redis_settings.url).hget(f"rq:job:{queueing.job_id(42)}", "data")
    assert json.loads(zlib.decompress(stored)) == ["runs.jobs.execute_run", None, [42], {}]


def test_a_run_started_with_its_job_held_back_is_sent_to_no_worker(redis_settings, transactional_db):
    profile = factories.profile()
    with queueing.held_back():
        held = executions.start_execution(executions.create_thread(profile), "run here")
    sent = executions.start_execution(executions.create_thread(profile), "run on a worker")
    jobs = queueing.host_queue()
    assert jobs.fetch_job(queueing.job_id(held.runs.get().pk)) is None
    assert jobs.fetch_job(queueing.job_id(sent.runs.get().pk)) is not None


def test_the_worker_refuses_every_job_that_is_not_a_host_job_and_keeps_working(live_stack, tmp_path):
    connection = redis.Redis.from_url(live_stack.redis.url)
    pickled, as_json = (
        Queue("default", connection=connection),
        Queue("default", connection=connection, serializer=JSONSerializer),
    )
    markers = [tmp_path / "unpickled", tmp_path / "called"]
    refused = [
        pickled.enqueue(leave_marker, Gadget(str(markers[0]))).id,
        as_json.enqueue(f"{__name__}.leave_marker", str(markers[1])).id,
        as_json.enqueue("runs.jobs.execute_run", "1 or 1=1").id,
        as_json.enqueue("runs.jobs.execute_run", 1, by="kwargs").id,
    ]
    garbage = as_json.enqueue("runs.jobs.execute_run", 1)
    connection.hset(garbage.key, "data", b"\x80\x04not a job at all")
    refused.append(garbage.id)

    def failed(job_id: str) -> bool:
        return HostJob.fetch(job_id, connection=connection).get_status() == JobStatus.FAILED

    wait_until(lambda: all(map(failed, refused)), timeout=60, what="the worker to refuse the forged jobs")
    assert not any(marker.exists() for marker in markers), "no forged job may run anything"
    log = live_stack.worker.log()
    for job_id in refused:
        assert f"job {job_id}: " in log and "refused, nothing ran" in log
    assert "its payload is not a job in JSON" in log and "which is not a Host job" in log

    execution = executions.start_execution(factories.thread(model="demo"), "and now a real one")

    def settled() -> bool:
        execution.refresh_from_db()
        return execution.status not in (ExecutionStatus.QUEUED, ExecutionStatus.RUNNING)

    wait_until(settled, timeout=60, what="the real execution to settle on the same worker")
    assert execution.status == ExecutionStatus.COMPLETED
    assert live_stack.worker.running
