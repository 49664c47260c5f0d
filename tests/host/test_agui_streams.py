"""The Host's stored timelines (what the websocket replays and streams) pass the official `@ag-ui/client`.

Each demo scenario is executed by the worker code in this process, then its frames are checked by
`verifyEvents` and the @ag-ui/core schemas: per run (a lane) and as the execution's whole sequence.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest
from django.db import transaction

from runs.harness.deferred import DeferredToolResume
from runs.models import Execution
from runs.services import executions, recovery, runner, timeline
from runs.services.codec import decode_item
from tests.agui_js.client import assert_verified, require_client
from tests.host import builders
from tests.host.conftest import DEMO_TOOLS
from tests.host.test_execution import Crash, crash_at_model_request, expire_leases

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_recovery_backoff")]


def run_to_end(execution: Execution) -> None:
    """Execute queued runs until none is left (recovery and resume runs included)."""
    while run := execution.runs.filter(status="queued").order_by("number").first():
        runner.execute_run(run.pk)


def answer_all(execution: Execution, answer: Any) -> None:
    suspended = execution.runs.order_by("-number").first()
    payload, version = suspended.journal.filter(kind="result.suspended").values_list("payload", "codec_version")[0]
    deferred = decode_item(payload, version).result.deferred
    if answer == "approve":
        results = deferred.build_results(approve_all=True)
    else:
        results = deferred.build_results(calls={entry.target_call.tool_call_id: answer for entry in deferred.calls})
    with transaction.atomic():
        executions.resume_execution(execution, DeferredToolResume(deferred, results))
    run_to_end(execution)


def frames(execution: Execution) -> list[dict[str, Any]]:
    return timeline.frames_after(execution.pk, 0, limit=100_000)


def scenario_streams(name: str, execution: Execution) -> dict[str, list[dict[str, Any]]]:
    lanes: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for frame in frames(execution):
        lanes[frame["run"]].append(frame["event"])
    streams = {f"{name}, run {number}": events for number, events in enumerate(lanes.values(), start=1)}
    streams[f"{name}, whole execution"] = [frame["event"] for frame in frames(execution)]
    return streams


def test_every_demo_scenario_stored_by_the_host_passes_the_official_client(demo_thread, monkeypatch):
    require_client()
    streams: dict[str, list[dict[str, Any]]] = {}

    def scenario(name: str, prompt: str) -> Execution:
        thread = builders.thread(model="demo", tools=DEMO_TOOLS)
        execution = executions.start_execution(thread, prompt)
        run_to_end(execution)
        return execution

    for name, prompt in [("lookup", "look up REC-42"), ("delegation", "research the outage"), ("tour", "tour")]:
        streams.update(scenario_streams(name, scenario(name, prompt)))
    approval = scenario("approval", "deploy the release")
    answer_all(approval, "approve")
    streams.update(scenario_streams("approval", approval))
    question = scenario("question", "ask the operator which environment")
    answer_all(question, "production")
    streams.update(scenario_streams("question", question))

    cancelled = executions.start_execution(demo_thread, "a slow 3 step")
    executions.cancel_execution(cancelled)
    run_to_end(cancelled)
    streams.update(scenario_streams("cancellation", cancelled))

    crashed = executions.start_execution(builders.thread(model="demo", tools=DEMO_TOOLS), "research, then look up")
    crash_at_model_request(monkeypatch, 2)
    with pytest.raises(Crash):
        runner.execute_run(crashed.runs.get().pk)
    monkeypatch.undo()
    expire_leases()
    recovery.sweep()
    run_to_end(crashed)
    crashed.refresh_from_db()
    assert crashed.runs.count() == 2 and crashed.status == "completed"
    streams.update(scenario_streams("recovery", crashed))

    assert any("subagentRunId" in event for event in streams["delegation, whole execution"])
    assert_verified(streams)
