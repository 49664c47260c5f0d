"""The health endpoint and the worker badge tell operators whether runs can execute at all."""

import json
import logging
import urllib.error
import urllib.request
from datetime import timedelta

import pytest
import redis
from django.db import OperationalError, connection
from django.utils import timezone
from rq import Queue

from runs.services.recovery import sweeper_passes
from runs.services.worker import loop_lag
from tests.support.outage_stack import Outage, use_short_leases
from tests.support.services import free_port, wait_until


@pytest.mark.django_db
def test_health_reports_each_part_with_its_own_status(client, settings, redis_settings):
    # A Redis database no worker listens on, whatever else the session started.
    settings.RQ_QUEUES = {"default": {"URL": redis_settings.url.rsplit("/", 1)[0] + "/15"}}
    settings.HARNESS_HEALTH_QUEUE_LIMIT = 1
    response = client.get("/health/")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "failing"
    assert {name: body[name]["status"] for name in ("database", "redis", "workers", "sweeper", "queue")} == {
        "database": "ok",
        "redis": "ok",
        "workers": "none",
        "sweeper": "none",
        "queue": "ok",
    }
    assert (body["workers"]["count"], body["queue"]["depth"]) == (0, 0)

    sweeper_passes.record_pass(timezone.now() - timedelta(seconds=settings.HARNESS_HEALTH_SWEEPER_STALE_SECONDS + 5))
    assert client.get("/health/").json()["sweeper"]["status"] == "stale"
    sweeper_passes.record_pass()
    sweeper = client.get("/health/").json()["sweeper"]
    assert (sweeper["status"], sweeper["sweepers"]) == ("ok", 1)

    connection = redis.Redis.from_url(settings.RQ_QUEUES["default"]["URL"])
    for run_pk in (1, 2):
        # Straight to RQ: django-rq's queue would wait for this test's transaction to commit. No worker takes them.
        Queue("default", connection=connection).enqueue("runs.jobs.execute_run", run_pk)
    assert client.get("/health/").json()["queue"] == {"status": "backlog", "depth": 2}
    connection.flushdb()


@pytest.mark.django_db
def test_health_reports_how_late_the_workers_event_loops_woke_their_runs(client, settings, redis_settings):
    settings.RQ_QUEUES = {"default": {"URL": redis_settings.url.rsplit("/", 1)[0] + "/14"}}
    connection = redis.Redis.from_url(settings.RQ_QUEUES["default"]["URL"])
    # Two worker registrations as the worker's heartbeat writes them: one loop keeps up, one lags.
    for name, lag in (("calm", "0.010"), ("starved", "2.500")):
        connection.sadd("rq:workers", f"rq:worker:{name}")
        connection.hset(f"rq:worker:{name}", mapping={"state": "busy", loop_lag.REGISTRATION_FIELD: lag})
    try:
        workers = client.get("/health/").json()["workers"]
    finally:
        connection.flushdb()
    assert workers == {"status": "ok", "count": 2, "loop_lag": 2.5, "lagging": 1}


@pytest.mark.django_db
def test_health_without_redis_says_what_it_cannot_know(client, settings):
    settings.RQ_QUEUES = {"default": {"URL": f"redis://127.0.0.1:{free_port()}/0"}}
    response = client.get("/health/")
    assert response.status_code == 503
    body = response.json()
    assert (body["database"]["status"], body["redis"]["status"]) == ("ok", "down")
    assert {body[name]["status"] for name in ("workers", "sweeper", "queue")} == {"unknown"}


def test_health_is_200_with_the_stack_running(live_stack, client):
    sweeper_passes.record_pass()
    # The worker registers itself in Redis shortly after start.
    wait_until(lambda: client.get("/health/").status_code == 200, timeout=20, what="a healthy stack")
    workers = client.get("/health/").json()["workers"]
    assert workers["count"] >= 1 and workers["loop_lag"] >= 0


@pytest.mark.django_db
def test_pages_need_a_login(client):
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


@pytest.mark.django_db
def test_the_approvals_link_counts_waiting_requests(client, operator_user):
    from runs.models import Checkpoint, DeferredRequest, DeferredStatus
    from runs.services.store.checkpoints import digest_of
    from tests.support.factories import make_execution, make_run

    client.force_login(operator_user)
    # The badge is always in the page (the approvals socket updates it) and hidden while nothing waits.
    assert "data-approvals-count hidden>0</span>" in client.get("/").content.decode()

    execution = make_execution(status="waiting")
    run = make_run(execution, status="suspended")
    state_json = '{"schema_version": "1", "thread_id": "t"}'
    checkpoint = Checkpoint.objects.create(
        thread=execution.thread,
        run=run,
        kind="terminal",
        state_json=state_json,
        digest=digest_of("", state_json, "", None),
    )
    # Only the set of the checkpoint the thread has selected can be answered, so only it is counted.
    execution.thread.selected_checkpoint = checkpoint
    execution.thread.save(update_fields=["selected_checkpoint"])
    for call_id in ("c1", "c2"):
        DeferredRequest.objects.create(
            execution=execution,
            run=run,
            checkpoint=checkpoint,
            tool_call_id=call_id,
            tool_name="deploy",
            kind="approval",
        )
    assert "data-approvals-count>2</span>" in client.get("/").content.decode()

    DeferredRequest.objects.filter(tool_call_id="c1").update(status=DeferredStatus.DECIDED)
    assert "data-approvals-count>1</span>" in client.get("/").content.decode()


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_health_tells_the_truth_through_a_redis_restart(settings):
    use_short_leases()
    stack = Outage(settings, workers=1).start()

    def health() -> tuple[int, dict]:
        try:
            with urllib.request.urlopen(f"{stack.daphne.base_url}/health/", timeout=10) as response:
                return response.status, json.load(response)
        except urllib.error.HTTPError as error:
            return error.code, json.load(error)

    try:
        wait_until(lambda: health()[0] == 200, timeout=60, what="a healthy stack")
        stack.redis.kill()
        status, body = health()
        assert (status, body["redis"]["status"], body["workers"]["status"]) == (503, "down", "unknown")
        stack.redis.start()
        # The restarted Redis is empty: the worker registers again and the sweeper notes its next pass.
        wait_until(lambda: health()[0] == 200, timeout=60, what="/health/ at 200 again after the restart")
        body = health()[1]
        assert (body["workers"]["count"], body["sweeper"]["status"], body["queue"]["status"]) == (1, "ok", "ok")
    finally:
        stack.stop()


@pytest.mark.django_db
def test_a_failing_part_says_a_fixed_reason_and_the_details_go_only_to_the_log(client, settings, monkeypatch, caplog):
    leak = (
        'connection to server at "db.internal" (10.0.0.5), port 5432 failed: '
        'password authentication failed for user "harness"'
    )

    def refused(*args, **kwargs):
        raise OperationalError(leak)

    redis_port = free_port()
    settings.RQ_QUEUES = {"default": {"URL": f"redis://harness:s3cret@127.0.0.1:{redis_port}/0"}}
    monkeypatch.setattr(connection, "cursor", refused)
    with caplog.at_level(logging.WARNING, logger="harness_site.health"):
        response = client.get("/health/")
    body = response.json()
    assert response.status_code == 503
    assert body["database"] == {"status": "down", "reason": "unreachable"}
    assert body["redis"] == {"status": "down", "reason": "unreachable"}
    for detail in ("db.internal", "10.0.0.5", "5432", "harness", "127.0.0.1", str(redis_port), "s3cret"):
        assert detail not in response.content.decode()
    assert leak in caplog.text and str(redis_port) in caplog.text
