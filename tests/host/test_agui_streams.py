"""The Host's AG-UI streams pass the official `@ag-ui/client`: the stored timeline (what the websocket replays and
streams) and the SSE endpoint's stream.

Each demo scenario is executed by the worker code in this process, then checked by `verifyEvents` and the
@ag-ui/core schemas: the websocket frames per run (a lane) and as the execution's whole sequence, and the SSE
text of the whole execution as `sse_events` sends it.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth import get_user_model
from django.db import transaction

from agui_api.streams import sse_events
from runs.harness.deferred import DeferredToolResume
from runs.models import Execution, Verdict
from runs.services import cancellation, executions, journal, recovery, runner, timeline
from runs.services.approvals import Answer, pending_requests, submit_decisions
from tests.agui_http import parse
from tests.agui_js.client import assert_verified, require_client
from tests.conftest import create_decider
from tests.host import builders
from tests.host.conftest import DEMO_TOOLS
from tests.host.test_execution import Crash, crash_at_model_request, expire_leases

pytestmark = pytest.mark.usefixtures("no_recovery_backoff")

Decide = Callable[[Execution, Any], None]


def run_to_end(execution: Execution) -> None:
    """Execute queued runs until none is left (recovery and resume runs included)."""
    while run := execution.runs.filter(status="queued").order_by("number").first():
        runner.execute_run(run.pk)


def resume_directly(execution: Execution, answer: Any) -> None:
    """Resume without the decision service (no decision item in the timeline)."""
    suspended = execution.runs.order_by("-number").first()
    deferred = journal.decoded(suspended.journal.get(kind="result.suspended")).result.deferred
    if answer == "approve":
        results = deferred.build_results(approve_all=True)
    else:
        results = deferred.build_results(calls={entry.target_call.tool_call_id: answer for entry in deferred.calls})
    with transaction.atomic():
        executions.resume_execution(execution, DeferredToolResume(deferred, results))


def decide_as_operator(execution: Execution, answer: Any) -> None:
    """Resume through the approval service, as the browser form and the AG-UI endpoint do."""
    user = create_decider(get_user_model(), f"decider-{execution.pk}", "decider-password-1")
    requests = pending_requests(Execution.objects.get(pk=execution.pk))
    answers = [
        Answer(r.tool_call_id, Verdict.APPROVED)
        if answer == "approve"
        else Answer(r.tool_call_id, Verdict.ANSWERED, result=answer)
        for r in requests
    ]
    submit_decisions(
        execution, checkpoint_id=requests[0].checkpoint_id, key=f"k-{execution.pk}", answers=answers, user=user
    )


def demo_scenarios(decide: Decide) -> dict[str, Execution]:
    def scenario(prompt: str) -> Execution:
        execution = executions.start_execution(builders.thread(model="demo", tools=DEMO_TOOLS), prompt)
        run_to_end(execution)
        return execution

    done = {
        name: scenario(prompt)
        for name, prompt in [("lookup", "look up REC-42"), ("delegation", "research the outage"), ("tour", "tour")]
    }
    for name, prompt, answer in [
        ("approval", "deploy the release", "approve"),
        ("question", "ask the operator which environment", "production"),
    ]:
        done[name] = scenario(prompt)
        decide(done[name], answer)
        run_to_end(done[name])

    cancelled = executions.start_execution(builders.thread(model="demo", tools=DEMO_TOOLS), "a slow 3 step")
    cancellation.cancel_execution(cancelled, user=None)
    run_to_end(cancelled)
    done["cancellation"] = cancelled

    crashed = executions.start_execution(builders.thread(model="demo", tools=DEMO_TOOLS), "research, then look up")
    with pytest.MonkeyPatch.context() as crash, pytest.raises(Crash):
        crash_at_model_request(crash, 2)
        runner.execute_run(crashed.runs.get().pk)
    expire_leases()
    recovery.sweep()
    run_to_end(crashed)
    done["recovery"] = crashed
    for execution in done.values():
        execution.refresh_from_db()
    assert crashed.runs.count() == 2 and crashed.status == "completed"
    assert {done[name].status for name in ("approval", "question", "lookup", "delegation")} == {"completed"}
    return done


def frames(execution: Execution) -> list[dict[str, Any]]:
    """The socket's frames, with each event decoded from its stored text."""
    return [
        {**frame, "event": json.loads(frame["event_json"])}
        for frame in timeline.frames_after(execution.pk, 0, limit=100_000)
    ]


@pytest.mark.django_db
def test_the_stored_timeline_of_every_demo_scenario_passes_the_official_client():
    require_client()
    streams: dict[str, list[dict[str, Any]]] = {}
    for name, execution in demo_scenarios(resume_directly).items():
        lanes: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for frame in frames(execution):
            lanes[frame["run"]].append(frame["event"])
        streams.update({f"{name}, run {n}": events for n, events in enumerate(lanes.values(), start=1)})
        streams[f"{name}, whole execution"] = [frame["event"] for frame in frames(execution)]
    assert any("subagentRunId" in event for event in streams["delegation, whole execution"])
    assert_verified(streams)


async def _sse_text(execution_pk: int) -> list[str]:
    return [chunk async for chunk in sse_events(execution_pk, 0, in_run=False)]


@pytest.mark.django_db(transaction=True)
def test_the_sse_stream_of_every_demo_scenario_passes_the_official_client(monkeypatch, settings):
    require_client()
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    # Committed runs would be queued on RQ; here this process executes them itself.
    monkeypatch.setattr(executions, "enqueue_run", lambda run: None)
    streams: dict[str, list[dict[str, Any]]] = {}
    for name, execution in demo_scenarios(decide_as_operator).items():
        sent = list(parse(iter("".join(async_to_sync(_sse_text)(execution.pk)).split("\n"))))
        stored = {frame["position"]: frame["event"] for frame in frames(execution)}
        # The stored events, in order, with their positions as SSE ids; only Host items between runs stay out.
        assert [json.dumps(stored[e.position], sort_keys=True) for e in sent if e.event["type"] != "RUN_FINISHED"] == [
            json.dumps(e.event, sort_keys=True) for e in sent if e.event["type"] != "RUN_FINISHED"
        ]
        left_out = {position for position in stored} - {e.position for e in sent}
        assert all(stored[position]["name"] == "a13n.host.decision" for position in left_out)
        assert bool(left_out) == (name in ("approval", "question"))
        streams[name] = [e.event for e in sent]
    assert_verified(streams)
