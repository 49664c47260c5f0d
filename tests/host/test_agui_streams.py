"""The Host's AG-UI streams pass the official `@ag-ui/client`: the execution websocket and the SSE endpoint.

Each demo scenario is executed by the worker code in this process, answered through the approval service where
it waits (approval, question, expiry, cancellation while waiting: each writes a decision item; a Host-managed child's
approval resumes its parent, whose request the child's end answers without a decision item), then checked by
`verifyEvents` and the @ag-ui/core schemas: what the websocket sends, read by `verify_socket.mjs` as an AG-UI
client would (one stream per lane and one for the whole execution, Host items left out), and the SSE text of the
whole execution as `sse_events` sends it.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.utils import timezone

from agui_api.auth import Caller
from agui_api.streams import sse_events
from runs.models import DeferredRequest, Execution, TimelineOrigin, Verdict
from runs.services.lifecycle import (
    Answer,
    cancellation,
    executions,
    expire_overdue_requests,
    pending_requests,
    submit_decisions,
)
from runs.services.recovery import recovery
from runs.services.timeline import read_side
from runs.services.worker import runner
from tests.support import factories
from tests.support.agui_http import parse
from tests.support.factories import create_decider
from tests.support.host_runs import DEMO_TOOLS, Crash, crash_at_model_request, expire_leases
from tests.support.sockets import as_user

pytestmark = [pytest.mark.usefixtures("no_recovery_backoff"), pytest.mark.django_db(transaction=True)]

# Scenarios with a decision item: an operator's, the host's expiry or cancellation, or a child's answer to its parent.
DECIDED = ("approval", "question", "expiry", "cancelled while waiting", "child", "parent of a child")


def run_to_end(execution: Execution) -> None:
    """Execute queued runs until none is left (recovery and resume runs included)."""
    while run := execution.runs.filter(status="queued").order_by("number").first():
        runner.execute_run(run.pk)


def decider(execution: Execution) -> User:
    return create_decider(get_user_model(), f"decider-{execution.pk}", "decider-password-1")


def decide_as_operator(execution: Execution, answer: Any) -> None:
    """Resume through the approval service, as the browser form and the AG-UI endpoint do."""
    requests = pending_requests(Execution.objects.get(pk=execution.pk))
    answers = [
        Answer(r.tool_call_id, Verdict.APPROVED)
        if answer == "approve"
        else Answer(r.tool_call_id, Verdict.ANSWERED, result=answer)
        for r in requests
    ]
    submit_decisions(
        execution,
        checkpoint_id=requests[0].checkpoint_id,
        key=f"k-{execution.pk}",
        answers=answers,
        user=decider(execution),
    )


def expire(execution: Execution) -> None:
    """What the sweep does to a set past its expiry: denials by nobody, and a resume run."""
    DeferredRequest.objects.filter(execution=execution).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert expire_overdue_requests() == 1


def demo_scenarios() -> dict[str, Execution]:
    def scenario(prompt: str) -> Execution:
        execution = executions.start_execution(factories.thread(model="demo", tools=DEMO_TOOLS), prompt)
        run_to_end(execution)
        return execution

    done = {
        name: scenario(prompt)
        for name, prompt in [("lookup", "look up REC-42"), ("delegation", "research the outage"), ("tour", "tour")]
    }
    for name, prompt, answer in [
        ("approval", "deploy the release", lambda execution: decide_as_operator(execution, "approve")),
        ("question", "ask the operator which environment", lambda execution: decide_as_operator(execution, "prod")),
        ("expiry", "deploy release 2.0", expire),
        ("cancelled while waiting", "deploy release 3.0", lambda e: cancellation.cancel_execution(e, user=decider(e))),
    ]:
        done[name] = scenario(prompt)
        answer(done[name])
        run_to_end(done[name])

    # A Host-managed child: the parent waits, the child asks for approval, and the child's end resumes the parent.
    parent = scenario("child: deploy release 2.0")
    child = Execution.objects.get(parent_request__execution=parent)
    run_to_end(child)
    decide_as_operator(child, "approve")
    run_to_end(child)
    run_to_end(parent)
    done["parent of a child"], done["child"] = parent, child

    crashed = executions.start_execution(factories.thread(model="demo", tools=DEMO_TOOLS), "research, then look up")
    with pytest.MonkeyPatch.context() as crash, pytest.raises(Crash):
        crash_at_model_request(crash, 2)
        runner.execute_run(crashed.runs.get().pk)
    expire_leases()
    recovery.sweep()
    run_to_end(crashed)
    done["recovery"] = crashed

    # A short lease makes the heartbeat, which passes the cancel request to the stream, beat within the slow step.
    factories.configure_policy(lease_seconds=1)
    cancelled = executions.start_execution(factories.thread(model="demo", tools=DEMO_TOOLS), "a slow 3 step")
    cancellation.cancel_execution(cancelled, user=None)
    run_to_end(cancelled)
    done["cancellation"] = cancelled
    for execution in done.values():
        execution.refresh_from_db()
    assert crashed.runs.count() == 2 and crashed.status == "completed"
    completed = ("approval", "question", "expiry", "lookup", "delegation", "parent of a child", "child")
    assert {done[name].status for name in completed} == {"completed"}
    assert {done[name].status for name in ("cancellation", "cancelled while waiting")} == {"cancelled"}
    return done


@pytest.fixture
def scenarios(monkeypatch, settings) -> dict[str, Execution]:
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    # Committed runs would be queued on RQ; here this process executes them itself.
    monkeypatch.setattr(executions, "enqueue_run", lambda run: None)
    return demo_scenarios()


def frames(execution: Execution) -> list[dict[str, Any]]:
    """The stored frames, with each event decoded from its stored text."""
    return [
        {**frame, "event": json.loads(frame["event_json"])}
        for frame in read_side.frames_after(execution.pk, 0, limit=100_000)
    ]


async def _socket_messages(user: User, execution_pk: int) -> list[str]:
    """Every message the execution's websocket sends a new subscriber, up to and including `ready`."""
    communicator = WebsocketCommunicator(as_user(user), f"/ws/executions/{execution_pk}/")
    connected, _ = await communicator.connect()
    assert connected
    await communicator.send_json_to({"type": "subscribe", "after": None})
    texts: list[str] = []
    while not texts or json.loads(texts[-1])["type"] != "ready":
        text = await communicator.receive_from(timeout=10)
        assert isinstance(text, str), "the Host sends text messages"
        texts.append(text)
    await communicator.disconnect()
    return texts


def _socket_events(texts: list[str]) -> list[dict[str, Any]]:
    messages = [json.loads(text) for text in texts]
    return [frame for message in messages if message["type"] == "events" for frame in message["events"]] + [
        message for message in messages if message["type"] == "event"
    ]


def test_the_websocket_of_every_demo_scenario_passes_the_official_client(agui_client, scenarios, django_user_model):
    viewer = django_user_model.objects.create_user("viewer", password="viewer-password-1")
    sockets = {name: async_to_sync(_socket_messages)(viewer, execution.pk) for name, execution in scenarios.items()}
    for name, execution in scenarios.items():
        sent = sorted(_socket_events(sockets[name]), key=lambda frame: frame["position"])
        stored = frames(execution)
        # The socket sends every stored event, decision items included (the timeline page draws them).
        assert [(f["position"], f["origin"], f["event"]) for f in sent] == [
            (f["position"], f["origin"], f["event"]) for f in stored
        ]
        decisions = [f for f in sent if f["origin"] == TimelineOrigin.HOST]
        assert [f["event"]["name"] for f in decisions] == (["a13n.host.decision"] if name in DECIDED else [])
    lanes = agui_client.assert_socket_verified(sockets)
    expected = {
        f"{name}, run {number}"
        for name, execution in scenarios.items()
        for number in execution.runs.filter(timeline__isnull=False).distinct().values_list("number", flat=True)
    } | {f"{name}, whole execution" for name in scenarios}
    assert lanes == expected
    assert {
        "approval, run 2",
        "question, run 2",
        "expiry, run 2",
        "recovery, run 2",
        "parent of a child, run 2",
    } <= lanes
    assert any(frame["subagent_run_id"] for frame in _socket_events(sockets["delegation"]))


async def _sse_text(execution_pk: int, caller: Caller) -> list[str]:
    return [chunk async for chunk in sse_events(execution_pk, 0, caller)]


def test_the_sse_stream_of_every_demo_scenario_passes_the_official_client(agui_client, scenarios):
    streams: dict[str, list[dict[str, Any]]] = {}
    caller = factories.token_caller(create_decider(get_user_model(), "sse-reader", "reader-password-1"))
    for name, execution in scenarios.items():
        sent = list(parse(iter("".join(async_to_sync(_sse_text)(execution.pk, caller)).split("\n"))))
        stored = {frame["position"]: frame["event"] for frame in frames(execution)}
        # The stored events, in order, with their positions as SSE ids; only Host items between runs stay out.
        assert [json.dumps(stored[e.position], sort_keys=True) for e in sent if e.event["type"] != "RUN_FINISHED"] == [
            json.dumps(e.event, sort_keys=True) for e in sent if e.event["type"] != "RUN_FINISHED"
        ]
        left_out = {position for position in stored} - {e.position for e in sent}
        assert all(stored[position]["name"] == "a13n.host.decision" for position in left_out)
        assert bool(left_out) == (name in DECIDED)
        streams[name] = [e.event for e in sent]
    agui_client.assert_verified(streams)
