"""`bin/run`'s supervisord config: kill -9 any one process and it comes back while the others keep serving."""

from __future__ import annotations

import os
import signal
import urllib.request

import pytest

from runs.demo_profile import ensure_demo_profile
from runs.models import ExecutionStatus
from runs.services.lifecycle import executions
from tests.support.services import Supervised, service_env, wait_until

pytestmark = pytest.mark.django_db(transaction=True)

RUNNING = 20  # supervisord's state code for RUNNING


@pytest.fixture
def supervised(settings):
    env = service_env(redis_url="", database_name=settings.DATABASES["default"]["NAME"])
    env["SECRET_KEY"] = settings.SECRET_KEY
    running = Supervised(env, workers=2, web=2).start()
    settings.RQ_QUEUES = {"default": {"URL": running.redis_url, "DEFAULT_TIMEOUT": 600}}
    try:
        yield running
    finally:
        running.stop()


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status == 200
    except OSError:
        return False


def all_running(stack: Supervised) -> dict[str, int]:
    """Pids of every process once supervisord reports them all running."""
    processes = stack.processes()
    if any(info["state"] != RUNNING for info in processes.values()):
        return {}
    return {name: info["pid"] for name, info in processes.items()}


def test_each_killed_process_comes_back_and_the_others_keep_running(supervised):
    names = {"redis", "sweeper", "worker-0", "worker-1", "web-0", "web-1"}
    wait_until(lambda: set(all_running(supervised)) == names, timeout=60, what="every process running")
    wait_until(lambda: answers(f"{supervised.base_url}/health/"), timeout=90, what="/health/ with two workers")

    for victim in ("worker-0", "sweeper", "web-0", "redis"):
        before = all_running(supervised)
        os.kill(before[victim], signal.SIGKILL)
        # The port stays open (supervisord holds it) and the other web process answers meanwhile.
        assert answers(f"{supervised.base_url}/login/")
        wait_until(
            lambda v=victim, b=before: (now := all_running(supervised)) and now[v] != b[v],
            timeout=60,
            what=f"{victim} back after kill -9",
        )
        after = all_running(supervised)
        # Nobody else was restarted, Redis's restart included: workers, sweeper and web ride it out.
        assert {n: p for n, p in after.items() if n != victim} == {n: p for n, p in before.items() if n != victim}

    wait_until(lambda: answers(f"{supervised.base_url}/health/"), timeout=90, what="/health/ after the kills")
    execution = executions.start_execution(executions.create_thread(ensure_demo_profile()), "look up REC-42")

    def settled() -> bool:
        execution.refresh_from_db()
        return execution.status == ExecutionStatus.COMPLETED

    wait_until(settled, timeout=120, what="an execution completed after every kind was killed once")
