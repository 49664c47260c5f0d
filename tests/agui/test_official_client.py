"""The official `@ag-ui/client` accepts the projection: `verifyEvents` and the @ag-ui/core schemas, run by node.

Every demo scenario of the engine (delegation, approval and its resume, a question and its answer, cancellation
inside and outside a child, a run continuing an interrupted history) and a generated sample of whole runs with
nested children and provider ids that repeat (numbered per response, reused by children).
"""

from __future__ import annotations

from typing import Any

from ag_ui.core import BaseEvent, EventType, RunFinishedEvent, RunFinishedInterruptOutcome, ToolCallResultEvent
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic_ai import ToolDenied, ToolFailed

from observers.agui import HarnessAguiStreamObserver
from runs.harness import DeferredToolResume, HarnessRunResultEvent, HarnessStreamEvent
from runs.harness.demo import build_demo_agent
from tests.support.generated_runs import Stream, generated_runs
from tests.support.observer_runs import PROPERTY_SETTINGS
from tests.support.property_examples import examples

PROMPTS = [
    "hello there",
    "please look up the record",
    "fail please",
    "ask the operator",
    "deploy it",
    "delegate some research",
    "tour",
    "drill the lookups",
]


def projected(items: list[HarnessStreamEvent[Any]]) -> list[BaseEvent]:
    observer = HarnessAguiStreamObserver()
    return [event for item in items for event in observer.observe(item)]


async def run_items(prompt: str | None = None, *, cancel_at: str | None = None, **options: Any) -> list[Any]:
    """One engine run; with `cancel_at` ("root" or "child") it is cancelled at the first text delta there."""
    stream = build_demo_agent().stream(prompt, **options)
    items: list[Any] = []
    async with stream:
        async for item in stream:
            items.append(item)
            delta = type(getattr(item, "event", None)).__name__ == "PartDeltaEvent"
            if cancel_at and delta and (item.run_id != stream.run_id) == (cancel_at == "child"):
                stream.cancel()
    return items


async def resumed(items: list[Any], answer: str | ToolDenied | ToolFailed) -> list[Any]:
    """The next run after a suspension, answered the way the Host answers for an operator: "approve" approves
    every approval, a `ToolDenied` denies them, anything else answers every other call (a `ToolFailed` refuses)."""
    result = items[-1].result
    deferred = result.deferred
    if answer == "approve":
        results = deferred.build_results(approve_all=True)
    elif isinstance(answer, ToolDenied):
        results = deferred.build_results(
            approvals={entry.target_call.tool_call_id: answer for entry in deferred.approvals}
        )
    else:
        results = deferred.build_results(calls={entry.target_call.tool_call_id: answer for entry in deferred.calls})
    return await run_items(previous_state=result.state, deferred_resume=DeferredToolResume(deferred, results))


async def test_every_demo_scenario_passes_the_official_client(agui_client) -> None:
    streams: dict[str, list[BaseEvent]] = {}
    for prompt in PROMPTS:
        streams[prompt] = projected(await run_items(prompt))
    deploy = await run_items("deploy it")
    streams["deploy, approved"] = projected(await resumed(deploy, "approve"))
    question = await run_items("ask the operator")
    streams["question, answered"] = projected(await resumed(question, "production"))
    streams["cancelled in the root"] = projected(await run_items("hello there", cancel_at="root"))
    child_cancelled = await run_items("delegate some research", cancel_at="child")
    streams["cancelled inside the child"] = projected(child_cancelled)
    assert isinstance(child_cancelled[-1], HarnessRunResultEvent) and child_cancelled[-1].result.status == "cancelled"
    # A recovery run continues the history an interrupted run left behind.
    continued = await run_items(previous_state=child_cancelled[-1].result.state)
    streams["continued after a cancellation"] = projected(continued)

    delegated = streams["delegate some research"]
    children = {getattr(event, "subagent_run_id", None) for event in delegated} - {None}
    assert children, "the delegation scenario has no child lane"
    agui_client.assert_verified(streams)
    # The whole list as one stream too: the official client accepts runs one after another.
    agui_client.assert_verified({"all runs in sequence": [event for events in streams.values() for event in events]})


async def test_a_denied_or_cancelled_deferred_call_gets_its_result_in_the_resumed_run(agui_client) -> None:
    """A client keeps a tool call open until a TOOL_CALL_RESULT names it; the call was started by the run that
    was interrupted, so the run that resumes it has to answer it, whatever the answer was."""
    # What the AG-UI endpoint makes of a denial and of a `cancelled` resume entry (agui_api/answers.py).
    answers: dict[str, ToolDenied | ToolFailed] = {
        "deploy it": ToolDenied("Not today."),
        "ask the operator": ToolFailed("Cancelled by the client."),
    }
    streams: dict[str, list[BaseEvent]] = {}
    for prompt, answer in answers.items():
        asked = await run_items(prompt)
        interrupted = projected(asked)
        terminal = interrupted[-1]
        assert isinstance(terminal, RunFinishedEvent) and isinstance(terminal.outcome, RunFinishedInterruptOutcome)
        (interrupt,) = terminal.outcome.interrupts
        again = projected(await resumed(asked, answer))
        results = [event for event in again if isinstance(event, ToolCallResultEvent)]
        assert [(event.tool_call_id, event.content) for event in results] == [(interrupt.tool_call_id, answer.message)]
        streams[f"{prompt}, refused"] = interrupted + again
    agui_client.assert_verified(streams)


def test_the_client_rejects_a_child_that_reuses_its_parents_tool_call_id(agui_client) -> None:
    """The check can fail: the stream the projection produced before ids were namespaced."""
    parent = {"type": EventType.TOOL_CALL_START.value, "toolCallId": "call-1-0", "toolCallName": "delegate"}
    child = {**parent, "toolCallName": "lookup_record", "subagentRunId": "child-run"}
    stream = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        parent,
        {"type": "TOOL_CALL_END", "toolCallId": "call-1-0"},
        {"type": "SUBAGENT_STARTED", "subagentRunId": "child-run", "name": "researcher"},
        child,
    ]
    (errors,) = agui_client.verify_streams({"reused": stream}).values()
    assert errors and "does not match the tool call 'call-1-0'" in errors[0]


@settings(PROPERTY_SETTINGS, max_examples=max(examples(8), PROPERTY_SETTINGS.max_examples // 2))
@given(data=st.data())
def test_generated_runs_pass_the_official_client(agui_client, data: st.DataObject) -> None:
    streams: dict[str, list[BaseEvent]] = {}
    for number in range(4):
        stream: Stream = data.draw(generated_runs(children=2))
        streams[f"generated {number}"] = projected(stream.items)
    agui_client.assert_verified(streams)
