"""The health endpoint and the worker badge tell operators whether runs can execute at all."""

import pytest


@pytest.mark.django_db
def test_health_is_503_without_a_worker(client, settings, redis_server):
    # A Redis database no worker listens on, whatever else the session started.
    settings.RQ_QUEUES = {"default": {"URL": redis_server.url.rsplit("/", 1)[0] + "/15"}}
    response = client.get("/health/")
    assert response.status_code == 503
    assert response.json() == {"database": True, "redis": True, "workers": 0}


def test_health_is_200_with_the_stack_running(live_stack, client):
    import time

    # The worker registers itself in Redis shortly after start; poll instead of sleeping a fixed time.
    deadline = time.monotonic() + 20
    while (response := client.get("/health/")).status_code != 200 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert response.status_code == 200
    assert response.json()["workers"] >= 1


@pytest.mark.django_db
def test_pages_need_a_login(client):
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


@pytest.mark.django_db
def test_the_approvals_link_counts_waiting_requests(client, operator_user):
    from runs.models import Checkpoint, DeferredRequest, DeferredStatus
    from runs.services.checkpoints import digest_of
    from tests.web.seed import make_execution, make_run

    client.force_login(operator_user)
    assert 'class="count"' not in client.get("/").content.decode()

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
    for call_id in ("c1", "c2"):
        DeferredRequest.objects.create(
            execution=execution,
            run=run,
            checkpoint=checkpoint,
            tool_call_id=call_id,
            tool_name="deploy",
            kind="approval",
        )
    assert '<span class="count" title="waiting for an answer">2</span>' in client.get("/").content.decode()

    DeferredRequest.objects.filter(tool_call_id="c1").update(status=DeferredStatus.DECIDED)
    assert '<span class="count" title="waiting for an answer">1</span>' in client.get("/").content.decode()
