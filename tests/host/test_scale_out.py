"""Scale-out under chaos, on PostgreSQL: 2 daphnes, 3 RQ workers and 2 sweepers share one database and one Redis.

Fifty executions run while random `kill -9`s hit workers (each running many runs at once), daphnes and
sweepers, workers are stopped with SIGTERM (their runs' leases given up after a short grace), and Redis is
restarted (empty) twice; a supervising loop starts again whatever died, as supervisord would. Viewers on both
daphnes follow some executions through it all, reconnecting from their cursor. Afterwards nothing is lost or
doubled: journals and timelines are contiguous, every execution settled, no unmarked side-effecting tool ran
twice, and every viewer saw exactly the stored timeline.

Runs only against PostgreSQL (`tests/host/test_postgres.py` starts a temporary cluster and runs it there):
SQLite allows one sweeper and one writer at a time.
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest
from django.db import connection
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidHandshake, WebSocketException
from websockets.typing import Origin

from runs.demo_profile import ensure_demo_profile
from runs.models import ACTIVE_EXECUTION_STATUSES, Execution, ExecutionStatus, ToolDispatch
from runs.services.lifecycle import executions
from tests.support import factories
from tests.support.host_runs import assert_contiguous
from tests.support.services import DaphneServer, ManagedProcess, RedisServer, RQWorker, service_env
from tests.support.sockets import cookie_of, frames_of, receive_message, stored_frames

pytestmark = pytest.mark.django_db(transaction=True)

EXECUTIONS = 50
WATCHED_EVERY = 5  # every fifth execution has a viewer on each daphne
KILLS = 12
REDIS_RESTARTS = 2
SETTLE_SECONDS = 420
SETTLED = {status for status in ExecutionStatus.values if status not in ACTIVE_EXECUTION_STATUSES}


def sweeper(env: dict[str, str]) -> ManagedProcess:
    return ManagedProcess("sweeper", [sys.executable, "manage.py", "harness_recover", "--loop", "1"], env)


@dataclass
class Fleet:
    """The processes of the test, restarted like supervisord would when one dies."""

    env: dict[str, str]
    redis: RedisServer
    daphnes: list[DaphneServer] = field(default_factory=list)
    workers: list[RQWorker] = field(default_factory=list)
    sweepers: list[ManagedProcess] = field(default_factory=list)
    kills: list[str] = field(default_factory=list)

    def start(self) -> Fleet:
        self.daphnes = [DaphneServer(self.env).start() for _ in range(2)]
        self.workers = [RQWorker(self.env).start() for _ in range(3)]
        self.sweepers = [sweeper(self.env).start() for _ in range(2)]
        return self

    def revive(self) -> None:
        for index, daphne in enumerate(self.daphnes):
            if not daphne.running:
                self.daphnes[index] = DaphneServer(self.env, port=daphne.port).start()
        for index, worker in enumerate(self.workers):
            if not worker.running:
                self.workers[index] = RQWorker(self.env).start()
        for index, process in enumerate(self.sweepers):
            if not process.running:
                self.sweepers[index] = sweeper(self.env).start()

    def kill_one(self, kind: str, rng: random.Random) -> None:
        if kind == "worker-stop":
            # SIGTERM: no more jobs, a short grace for its runs, then their leases to the sweepers.
            rng.choice([worker for worker in self.workers if worker.running]).popen.send_signal(signal.SIGTERM)
        else:
            groups: dict[str, Sequence[ManagedProcess]] = {
                "worker": self.workers,
                "daphne": self.daphnes,
                "sweeper": self.sweepers,
            }
            rng.choice(groups[kind]).kill()
        self.kills.append(kind)

    def restart_redis(self) -> None:
        self.redis.kill()
        self.redis.start()
        self.kills.append("redis")

    def stop(self) -> None:
        for process in [*self.daphnes, *self.workers, *self.sweepers]:
            process.stop()

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.log()[-1500:]}" for p in [*self.workers, *self.sweepers])


class SocketViewer:
    """A websocket client that follows one execution until it settles, reconnecting from its cursor."""

    def __init__(self, daphne: DaphneServer, execution_pk: int, cookie: str) -> None:
        self.url = f"{daphne.ws_url}/ws/executions/{execution_pk}/"
        self.origin = daphne.base_url
        self.cookie = cookie
        self.frames: list[dict] = []
        self.reconnects = 0

    async def follow(self) -> None:
        while True:
            try:
                if await self._session():
                    return
            except (OSError, TimeoutError, InvalidHandshake, WebSocketException):
                pass
            self.reconnects += 1
            await asyncio.sleep(0.5)

    async def _session(self) -> bool:
        """One connection; True once the execution settled and everything before was received."""
        cursor = self.frames[-1]["position"] if self.frames else None
        async with connect(self.url, origin=Origin(self.origin), additional_headers={"Cookie": self.cookie}) as socket:
            await socket.send(json.dumps({"type": "subscribe", "after": cursor}))
            ready, settled = False, False
            while True:
                message = await receive_message(socket)
                self.frames += frames_of(message)
                if message["type"] == "status":
                    settled = message["status"] in SETTLED
                ready = ready or message["type"] == "ready"
                # A settled status after `ready` follows a catch-up, so every event before it is here.
                if ready and settled:
                    return True


@pytest.fixture
def fleet(settings):
    if connection.vendor != "postgresql":
        pytest.skip("scale-out runs on PostgreSQL (tests/host/test_postgres.py starts one)")
    redis = RedisServer().start()
    env = service_env(redis_url=redis.url, database_name=settings.DATABASES["default"]["NAME"])
    env["HARNESS_SOCKET_REFRESH_SECONDS"] = "2"
    env["HARNESS_WORKER_GRACE_SECONDS"] = "2"
    settings.RQ_QUEUES = {"default": {"URL": redis.url, "DEFAULT_TIMEOUT": 600}}
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    running = Fleet(env, redis).start()
    try:
        yield running
    finally:
        running.stop()
        redis.stop()


def test_fifty_executions_survive_random_kills_and_redis_restarts(fleet, operator_user):
    factories.configure_policy(lease_seconds=4, max_attempts=20)
    profile = ensure_demo_profile()
    started = []
    for number in range(EXECUTIONS):
        # Drills run the unmarked, side-effecting slow_step; lookups are retryable.
        prompt = f"drill 0.5 on REC-{number}" if number % 2 else f"look up REC-{number}"
        thread = executions.create_thread(profile, title=f"chaos {number}")
        started.append(executions.start_execution(thread, prompt).pk)

    cookie = cookie_of(operator_user)
    watched = started[::WATCHED_EVERY]
    viewers = [SocketViewer(daphne, pk, cookie) for pk in watched for daphne in fleet.daphnes]
    followed: list[bool] = []

    async def follow_all() -> None:
        await asyncio.gather(*(viewer.follow() for viewer in viewers))
        followed.append(True)

    follow = threading.Thread(target=asyncio.run, args=(follow_all(),), daemon=True)
    follow.start()

    rng = random.Random(18)
    # Every kind of process is killed KILLS / 4 times, in a random order; Redis restarts in between.
    kills = rng.sample(["worker", "worker-stop", "daphne", "sweeper"] * (KILLS // 4), KILLS)
    chaos = iter([*kills[:5], "redis", *kills[5:9], "redis", *kills[9:]])
    deadline = time.monotonic() + SETTLE_SECONDS
    while True:
        fleet.revive()
        active = Execution.objects.filter(pk__in=started, status__in=ACTIVE_EXECUTION_STATUSES)
        step = next(chaos, None)
        if step is None and not active.exists():
            break
        assert time.monotonic() < deadline, f"not settled: {list(active.values_list('pk', 'status'))}\n{fleet.logs()}"
        if step == "redis":
            fleet.restart_redis()
        elif step is not None:
            fleet.kill_one(step, rng)
        time.sleep(rng.uniform(1.0, 3.0) if step else 0.5)
    follow.join(timeout=120)
    assert followed, "viewers did not see every execution settle"

    assert fleet.kills.count("redis") == REDIS_RESTARTS and len(fleet.kills) - REDIS_RESTARTS >= 10, fleet.kills
    assert {"worker", "worker-stop", "daphne", "sweeper"} <= set(fleet.kills), fleet.kills
    for execution in Execution.objects.filter(pk__in=started):
        assert execution.status in SETTLED
        assert_contiguous(execution)
        # An unmarked side effect runs at most once per call, even when its run was killed around it.
        calls = ToolDispatch.objects.filter(run__execution=execution, recovery_retryable=False)
        call_ids = list(calls.values_list("tool_call_id", flat=True))
        assert len(call_ids) == len(set(call_ids))
    for viewer in viewers:
        assert viewer.frames == stored_frames(int(viewer.url.rstrip("/").rsplit("/", 1)[1]))
