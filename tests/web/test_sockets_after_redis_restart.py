"""Sockets that stay open through a Redis restart keep getting updates (issue 18).

A restarted Redis is empty: it forgot every group membership and every message in flight. Real processes:
redis-server (killed and started again on its port), daphne and this test's publisher; a status committed
after the restart must reach a socket that was open before it, whether its message is lost or not.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from ag_ui.core import TextMessageContentEvent
from asgiref.sync import sync_to_async
from websockets.asyncio.client import connect

from runs.models import Execution
from runs.services.timeline import publish_execution_status
from tests.support import factories
from tests.support.outage_stack import Outage
from tests.support.sockets import cookie_of

pytestmark = pytest.mark.django_db(transaction=True)

# How long a socket may take to notice: its refresh runs every second here.
NOTICE_SECONDS = 30


@pytest.fixture
def restartable(settings):
    running = Outage(settings, workers=0, env={"HARNESS_SOCKET_REFRESH_SECONDS": "1"})
    try:
        yield running.start()
    finally:
        running.stop()


def finish(execution_pk: int) -> None:
    Execution.objects.filter(pk=execution_pk).update(status="completed")
    publish_execution_status(execution_pk)


async def receive_until(socket, predicate) -> dict:
    while not predicate(message := json.loads(await socket.recv())):
        pass
    return message


def test_the_thread_list_socket_gets_statuses_after_a_redis_restart(restartable, operator_user):
    execution = factories.make_execution()
    cookie = cookie_of(operator_user)

    async def watch() -> dict:
        async with connect(
            f"{restartable.daphne.ws_url}/ws/threads/",
            origin=restartable.daphne.base_url,
            additional_headers={"Cookie": cookie},
        ) as socket:
            await socket.send(json.dumps({"type": "subscribe", "threads": [execution.thread_id]}))
            await receive_until(socket, lambda message: message["type"] == "ready")
            await sync_to_async(restartable.redis.kill)()
            await sync_to_async(restartable.redis.start)()
            await sync_to_async(finish)(execution.pk)
            return await asyncio.wait_for(
                receive_until(socket, lambda message: message.get("status") == "completed"), NOTICE_SECONDS
            )

    message = asyncio.run(watch())
    assert (message["type"], message["thread"], message["execution"]) == (
        "thread.status",
        execution.thread_id,
        execution.pk,
    )


def test_a_timeline_socket_gets_events_and_the_end_after_a_redis_restart(restartable, operator_user):
    run = factories.make_run(factories.make_execution())
    factories.append_events(run, factories.text_run_events(run, ["before "], finish=False))
    cookie = cookie_of(operator_user)

    def append_and_finish() -> int:
        [event] = factories.append_events(run, [TextMessageContentEvent(message_id="m1", delta="after")])
        finish(run.execution_id)
        return event.position

    async def watch() -> tuple[list[dict], dict, int]:
        async with connect(
            f"{restartable.daphne.ws_url}/ws/executions/{run.execution_id}/",
            origin=restartable.daphne.base_url,
            additional_headers={"Cookie": cookie},
        ) as socket:
            await socket.send(json.dumps({"type": "subscribe", "after": None}))
            await receive_until(socket, lambda message: message["type"] == "ready")
            await sync_to_async(restartable.redis.kill)()
            await sync_to_async(restartable.redis.start)()
            position = await sync_to_async(append_and_finish)()
            events: list[dict[str, Any]] = []

            def collect(message: dict[str, Any]) -> bool:
                events.extend([message] if message["type"] == "event" else message.get("events", []))
                return message.get("status") == "completed"

            status = await asyncio.wait_for(receive_until(socket, collect), NOTICE_SECONDS)
            return events, status, position

    events, status, position = asyncio.run(watch())
    assert [(event["position"], event["event"].get("delta")) for event in events] == [(position, "after")]
    assert status["type"] == "status"
