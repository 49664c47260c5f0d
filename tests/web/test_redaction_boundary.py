"""End to end: a secret under a redacted key is seen nowhere but in the journal.

A real worker runs the demo agent on a prompt carrying `password: <secret>`; the policy redacts `password`
and `query` and makes `search_records` wait for approval. So the secret travels in tool arguments (under
`query`), in the interrupt of the suspended run, in the tool result, and in the final answer, which the model
streams in 8-character deltas that split the key from its value. Every page, raw event view, admin page,
export, AG-UI event stream and websocket frame of the execution is then fetched from daphne and searched.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections import defaultdict

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from websockets.asyncio.client import connect
from websockets.typing import Origin

from runs.demo_profile import ensure_demo_profile
from runs.models import (
    Decision,
    DeferredRequest,
    Execution,
    ExecutionStatus,
    JournalEntry,
    TimelineEvent,
    ToolDispatch,
)
from runs.services.lifecycle import executions
from runs.services.timeline import REDACTED
from tests.support import factories
from tests.support.services import wait_until
from tests.support.sockets import cookie_of

SECRET = "hunter2-Zq81x"
PIECES = ("hunter2", "Zq81x")  # a secret cut at a delta boundary must not leak either half
PROMPT = f"look up password: {SECRET}"


@pytest.fixture
def superuser(django_user_model):
    user = django_user_model.objects.create_superuser("root", password="root-password-1")
    user.user_permissions.add(Permission.objects.get(codename="decide_deferred"))
    return user


def fetch(base_url: str, path: str, cookie: str) -> str:
    request = urllib.request.Request(f"{base_url}{path}", headers={"Cookie": cookie})
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 200, path
        return response.read().decode()


async def socket_frames(ws_url: str, base_url: str, cookie: str, execution_pk: int) -> list[dict]:
    """Every message the execution's websocket sends up to `ready`: a whole replay, as a browser gets it."""
    received = []
    async with connect(
        f"{ws_url}/ws/executions/{execution_pk}/", origin=Origin(base_url), additional_headers={"Cookie": cookie}
    ) as socket:
        await socket.send(json.dumps({"type": "subscribe", "after": None}))
        while True:
            message = json.loads(await socket.recv())
            received.append(message)
            if message["type"] in ("ready", "error"):
                return received


def streamed_texts(messages: list[dict]) -> list[str]:
    """The deltas of each streamed message joined, as the timeline shows them."""
    frames = [frame for message in messages for frame in message.get("events", [message])]
    joined: dict[str, str] = defaultdict(str)
    for frame in frames:
        event = frame.get("event", {})
        if "delta" in event and isinstance(event["delta"], str):
            joined[event.get("messageId") or event.get("toolCallId")] += event["delta"]
    return list(joined.values())


def wait_for_status(execution: Execution, status: str) -> None:
    def reached() -> bool:
        execution.refresh_from_db()
        return execution.status == status

    wait_until(reached, timeout=60, what=f"execution {execution.pk} {status}")


def pages_of(execution: Execution) -> list[str]:
    thread = execution.thread
    decisions = Decision.objects.filter(request__execution=execution)
    requests = DeferredRequest.objects.filter(execution=execution)
    positions = TimelineEvent.objects.filter(execution=execution).values_list("position", flat=True)
    return [
        "/",
        "/?q=Secret",
        f"/threads/{thread.pk}/",
        f"/executions/{execution.pk}/",
        f"/executions/{execution.pk}/approvals/",
        *(f"/runs/{run.pk}/" for run in execution.runs.all()),
        *(f"/executions/{execution.pk}/events/{position}/" for position in positions),
        *(f"/executions/{execution.pk}/events/{position}/?format=json" for position in positions),
        "/approvals/",
        "/approvals/rows/",
        f"/agui/executions/{execution.pk}/events",
        "/approvals/audit/",
        "/approvals/audit/decisions.csv",
        "/admin/runs/decision/",
        *(f"/admin/runs/decision/{decision.pk}/change/" for decision in decisions),
        "/admin/runs/deferredrequest/",
        *(f"/admin/runs/deferredrequest/{request.pk}/change/" for request in requests),
    ]


def assert_nowhere(texts: list[str], where: str) -> None:
    for text in texts:
        for piece in (SECRET, *PIECES):
            assert piece not in text, f"{piece!r} leaked in {where}: ...{text[max(0, text.find(piece) - 200) :][:400]}"


def test_a_planted_secret_appears_nowhere_but_in_the_journal(live_stack, superuser):
    factories.configure_policy(redact_patterns=["password", "query"], approval_rules=[{"tool": "search_records"}])
    thread = executions.create_thread(ensure_demo_profile(), title="Secret lookup")
    execution = executions.start_execution(thread, PROMPT, user=superuser)
    cookie = cookie_of(superuser)
    base, ws = live_stack.base_url, live_stack.ws_url

    wait_for_status(execution, ExecutionStatus.WAITING)
    interrupt = TimelineEvent.objects.get(execution=execution, event_type="RUN_FINISHED").event
    (waiting,) = interrupt["outcome"]["interrupts"]
    assert waiting["metadata"]["args"] == {"query": REDACTED}, "the interrupt is planted and masked"
    form = fetch(base, f"/executions/{execution.pk}/approvals/", cookie)
    assert "search_records" in form and REDACTED in form
    while_waiting = [fetch(base, path, cookie) for path in pages_of(execution)]

    client = Client()
    client.force_login(superuser)
    thread.refresh_from_db()
    request = DeferredRequest.objects.get(execution=execution)
    answered = client.post(
        f"/executions/{execution.pk}/approvals/",
        {
            "checkpoint": thread.selected_checkpoint_id,
            "submission_key": "secret-approval",
            "decision-0-id": request.tool_call_id,
            "decision-0-choice": "approve",
        },
        HTTP_ACCEPT="application/json",
    )
    assert answered.status_code == 200, answered.content
    wait_for_status(execution, ExecutionStatus.COMPLETED)

    after = [fetch(base, path, cookie) for path in pages_of(execution)]
    frames = asyncio.run(socket_frames(ws, base, cookie, execution.pk))
    event_frames = [frame for message in frames for frame in message.get("events", [message])]
    assert frames[-1]["type"] == "ready"
    assert sum(frame["type"] == "event" for frame in event_frames) == execution.timeline.count()

    assert_nowhere(while_waiting, "a page while waiting")
    assert_nowhere(after, "a page after completion")
    assert_nowhere([json.dumps(frame) for frame in frames], "a websocket frame")
    assert_nowhere(streamed_texts(frames), "a streamed message")
    # It was there to leak: the journal keeps it, the tool got it, and the approval was for the real value.
    assert any(SECRET in entry.payload for entry in JournalEntry.objects.filter(run__execution=execution))
    assert ToolDispatch.objects.get(tool_name="search_records").args == {"query": PROMPT}
    assert Decision.objects.get(request=request).approved_args == {"query": PROMPT}
    assert "RUN_FINISHED" in after[pages_of(execution).index(f"/agui/executions/{execution.pk}/events")]
    final_text = max(streamed_texts(frames), key=len)
    assert f"password: {REDACTED}" in final_text, "the answer quoting the secret streamed in and was masked"
