"""A whole stack of its own for tests that take Redis away: the session's stack shares its Redis with others."""

from __future__ import annotations

import sys

import redis
from pytest_django.fixtures import Settings
from rq import Worker

from harness_site.settings import channel_layer_config
from runs.services.lifecycle import current_policy_version
from runs.services.store import publish_policy_version
from tests.support.services import DaphneServer, ManagedProcess, RedisServer, RQWorker, service_env

# Runs started during an outage are re-queued by the sweeper once this lease length passed since they were made.
LEASE_SECONDS = 10


def use_short_leases() -> None:
    publish_policy_version(
        current_policy_version().policy,
        created_by=None,
        comment="short leases for outage tests",
        lease_seconds=LEASE_SECONDS,
    )


class Outage:
    """Its own redis-server (which the test may kill and start again), daphne, RQ workers and the sweeper,
    sharing the test database; this process's django-rq and Channels point at the same Redis. `env` adds to the
    processes' environment."""

    def __init__(self, settings: Settings, *, workers: int, env: dict[str, str] | None = None) -> None:
        self.redis = RedisServer().start()
        settings.RQ_QUEUES = {"default": {"URL": self.redis.url, "DEFAULT_TIMEOUT": 600}}
        settings.CHANNEL_LAYERS = {"default": channel_layer_config(self.redis.url)}
        env = {
            **service_env(redis_url=self.redis.url, database_name=settings.DATABASES["default"]["NAME"]),
            **(env or {}),
        }
        self.daphne = DaphneServer(env)
        self.workers = [RQWorker(env) for _ in range(workers)]
        self.sweeper = ManagedProcess("sweeper", [sys.executable, "manage.py", "harness_recover", "--loop", "1"], env)

    @property
    def processes(self) -> list[ManagedProcess]:
        return [self.daphne, *self.workers, self.sweeper]

    def start(self) -> Outage:
        for process in self.processes:
            process.start()
        return self

    def stop(self) -> None:
        for process in self.processes:
            process.stop()
        self.redis.stop()

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.redis.url)

    def registered_worker_pids(self) -> set[int]:
        try:
            return {worker.pid for worker in Worker.all(connection=self.client()) if worker.pid is not None}
        except redis.ConnectionError:
            return set()

    def logs(self) -> str:
        return "\n".join(f"--- {process.name}\n{process.log()[-4000:]}" for process in self.processes)
