"""What the websocket benchmarks share: daphne as a real subprocess, a logged-in session, seeded timelines."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.support.services import DaphneServer

from .synthetic import SyntheticRun

__all__ = ("daphne", "live_clients", "operator_cookie", "seed_timeline", "stop_daphne", "timeline_events")


_servers: list[DaphneServer] = []


def daphne(index: int = 0) -> DaphneServer:
    """daphne number `index` on a free port, on this process's database and Redis, started once per suite process
    (several are several web processes behind one load balancer)."""
    while len(_servers) <= index:
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "DJANGO_SETTINGS_MODULE": "harness_site.settings"}
        _servers.append(DaphneServer(env).start())
    return _servers[index]


def stop_daphne() -> None:
    while _servers:
        _servers.pop().stop()


def operator_cookie() -> str:
    """A `Cookie` header value of a logged-in operator (the timeline sockets refuse anonymous users)."""
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.test import Client

    from runs.models import DEFAULT_TEAM, Membership, Team, TeamRole

    user, _ = get_user_model().objects.get_or_create(username="bench-operator")
    # The sockets answer only a member of the execution's team; the bench's executions are in the default one.
    team, _ = Team.objects.get_or_create(name=DEFAULT_TEAM)
    Membership.objects.get_or_create(user=user, team=team, defaults={"role": TeamRole.VIEWER})
    client = Client()
    client.force_login(user)
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"


@functools.cache
def timeline_events(synthetic: SyntheticRun) -> tuple[tuple[str, dict[str, Any], Any], ...]:
    """The run's AG-UI events as the projection stores them: (subagent run id, JSON, occurred_at)."""
    from observers.agui import HarnessAguiStreamObserver
    from runs.services.timeline import dump_event

    observer = HarnessAguiStreamObserver(retain_events=False)
    events = []
    for item in synthetic.items:
        for event in observer.observe(item):
            dumped = dump_event(event)
            events.append((dumped.get("subagentRunId", ""), dumped, item.occurred_at))
    return tuple(events)


def seed_timeline(run: Any, synthetic: SyntheticRun) -> int:
    """Store the run's events as its execution's timeline (positions 1..n); returns n."""
    from runs.models import TimelineEvent

    rows = [
        TimelineEvent(
            execution_id=run.execution_id,
            position=position,
            run=run,
            subagent_run_id=subagent,
            event_type=event["type"],
            event=event,
            occurred_at=occurred_at,
        )
        for position, (subagent, event, occurred_at) in enumerate(timeline_events(synthetic), start=1)
    ]
    TimelineEvent.objects.bulk_create(rows, batch_size=2000)
    return len(rows)


@contextmanager
def live_clients(
    server: DaphneServer, cookie: str, execution_pk: int, count: int, last_position: int
) -> Iterator[list[list[tuple[int, float]]]]:
    """`count` websocket clients on the execution (`bench.live_clients`, a process of their own), subscribed and
    ready when the block starts; once it ends, the yielded list holds each client's live receipts
    `(position, time)` up to `last_position`."""
    argv = [sys.executable, "-m", "bench.live_clients", server.ws_url, server.base_url, cookie]
    clients = subprocess.Popen(
        [*argv, str(execution_pk), str(count), str(last_position)], stdout=subprocess.PIPE, text=True
    )
    assert clients.stdout is not None
    receipts: list[list[tuple[int, float]]] = []
    try:
        if clients.stdout.readline().strip() != "READY":
            raise RuntimeError("the live clients did not get ready")
        yield receipts
        output, _ = clients.communicate(timeout=120)
    finally:
        if clients.poll() is None:
            clients.kill()
    receipts.extend(json.loads(output.strip().splitlines()[-1])["receipts"])
