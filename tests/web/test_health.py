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
