"""The offline demo agent: every feature chosen by the prompt, deterministic, no network."""

from __future__ import annotations

import pytest
from pydantic_ai import PartDeltaEvent, TextPartDelta, ThinkingPart, ToolDenied

from runs.harness import (
    SHELL_TOOL_NAMES,
    DeferredToolResume,
    DynamicEnvironmentCapability,
    HarnessExtensionEvent,
    HarnessRunResultEvent,
    HarnessState,
)
from runs.harness.demo import JsonLinesRecorder, MemoryRecorder, build_demo_agent, demo_definition, demo_tools
from tests.support.harness_streams import collect


def test_the_demo_offers_no_shell():
    """S87 and security: the Host's tool registry is the demo's, and a shell is never part of it.

    A dashboard that can start runs must not give a model a shell on the worker; an application opts in to a
    shell environment per run, outside the Host.
    """
    definition = demo_definition()
    assert not {tool.name for tool in definition.tools} & set(SHELL_TOOL_NAMES)
    assert not any(isinstance(capability, DynamicEnvironmentCapability) for capability in definition.capabilities)


async def test_plain_prompt_streams_thinking_and_text():
    stream = build_demo_agent().stream("hello there")
    items = await collect(stream)
    result = items[-1].result
    assert result.status == "completed"
    assert result.output.startswith('You said: "hello there"')
    deltas = [item.event for item in items[:-1] if isinstance(item.event, PartDeltaEvent)]
    assert any(isinstance(event.delta, TextPartDelta) for event in deltas)
    assert isinstance(result.state.message_history[1].parts[0], ThinkingPart)


async def test_lookup_calls_read_only_tools():
    result = await build_demo_agent().run("please look up the record")
    assert result.status == "completed"
    assert "lookup_record (success)" in result.output
    assert "search_records (success)" in result.output


@pytest.mark.parametrize(
    ("prompt", "kind", "tool", "args"),
    [
        ("Ask for confirmation", "approval", "deploy_release", {"version": "1.4.2"}),
        ("confirm the change", "approval", "deploy_release", {"version": "1.4.2"}),
        ("deploy release 3.0", "approval", "deploy_release", {"version": "3.0"}),
        ("deploy 1.5.0 after a slow step of 1 second", "approval", "deploy_release", {"version": "1.5.0"}),
        ("ask the operator which environment", "question", "ask_operator", None),
    ],
)
async def test_the_prompt_chooses_the_kind_of_request_and_its_arguments(prompt, kind, tool, args):
    first = await build_demo_agent().run(prompt, previous_state=HarnessState.new(thread_id="thr_demo1"))

    assert first.status == "suspended"
    [entry] = first.deferred.entries()
    assert (entry.model_call.tool_name, first.deferred.kind(entry.target_call.tool_call_id)) == (tool, kind)
    if args is not None:
        assert entry.model_call.args_as_dict() == args


async def test_a_lookup_uses_the_record_the_prompt_names():
    result = await build_demo_agent().run("look up rec-7 please")
    calls = [part for message in result.state.message_history for part in getattr(message, "tool_calls", [])]
    assert [call.args_as_dict() for call in calls if call.tool_name == "lookup_record"] == [{"record_id": "REC-7"}]


async def test_deploy_suspends_for_approval_and_runs_once_approved():
    recorder = MemoryRecorder()
    executable = build_demo_agent(recorder=recorder)
    first = await executable.run("deploy the release", previous_state=HarnessState.new(thread_id="thr_demo1"))

    assert first.status == "suspended"
    assert [entry.model_call.tool_name for entry in first.deferred.approvals] == ["deploy_release"]
    assert recorder.count("deploy_release") == 0

    results = first.deferred.build_results(approve_all=True)
    resume = DeferredToolResume(first.deferred, results)
    second = await executable.run(previous_state=first.state, deferred_resume=resume)
    assert second.status == "completed"
    assert "deployed 1.4.2" in second.output
    assert recorder.count("deploy_release") == 1


async def test_denied_deploy_does_not_run():
    recorder = MemoryRecorder()
    executable = build_demo_agent(recorder=recorder)
    first = await executable.run("deploy it")
    [approval] = first.deferred.approvals
    results = first.deferred.build_results(approvals={approval.target_call.tool_call_id: ToolDenied("not today")})
    resume = DeferredToolResume(first.deferred, results)
    second = await executable.run(previous_state=first.state, deferred_resume=resume)
    assert "deploy_release (denied): not today" in second.output
    assert recorder.count("deploy_release") == 0


async def test_ask_suspends_on_an_external_call_answered_by_the_operator():
    first = await build_demo_agent().run("ask the operator")
    assert first.status == "suspended"
    [call] = first.deferred.calls
    assert call.model_call.tool_name == "ask_operator"
    assert first.deferred.metadata[call.target_call.tool_call_id] == {"question": "Which environment should I use?"}
    results = first.deferred.build_results(calls={call.target_call.tool_call_id: "use staging"})
    second = await build_demo_agent().run(
        previous_state=first.state, deferred_resume=DeferredToolResume(first.deferred, results)
    )
    assert "ask_operator (success): use staging" in second.output


async def test_research_delegates_to_the_inline_child():
    stream = build_demo_agent().stream("research the outage")
    items = await collect(stream)
    child_runs = {item.run_id for item in items} - {stream.run_id}
    assert len(child_runs) == 1
    assert "Research summary" in items[-1].result.output
    actions = [
        item.event.payload["action"]
        for item in items
        if isinstance(getattr(item, "event", None), HarnessExtensionEvent) and item.event.kind == "delegation"
    ]
    assert actions == ["started", "completed"]


async def test_fail_gives_a_failure_candidate_with_the_streamed_text():
    result = await build_demo_agent().run("fail please")
    assert result.status == "failed"
    assert (result.failure.code, result.failure.message) == (
        "model_http_error",
        "The model provider answered with an error (HTTP 503).",
    )
    assert result.state.message_history[-1].parts[0].content == "Preparing the report for you"


async def test_slow_step_records_its_dispatch(tmp_path):
    recorder = JsonLinesRecorder(tmp_path / "calls.jsonl")
    result = await build_demo_agent(recorder=recorder).run("a slow job of 0.01 seconds")
    assert result.status == "completed"
    assert recorder.calls() == [("slow_step", {"seconds": 0.01})]


async def test_tour_walks_through_lookup_delegation_and_approval():
    stream = build_demo_agent().stream("give me the tour")
    items = await collect(stream)
    result = items[-1].result
    assert isinstance(items[-1], HarnessRunResultEvent)
    assert result.status == "suspended"
    tools = [part.tool_name for message in result.state.message_history for part in getattr(message, "tool_calls", [])]
    assert tools == ["lookup_record", "search_records", "delegate_to_researcher", "deploy_release"]


def test_real_model_strings_get_the_same_tools():
    executable = build_demo_agent(model="openai:gpt-4o")
    assert executable.definition.model == "openai:gpt-4o"
    assert {getattr(tool, "name", None) for tool in executable.definition.tools} >= {
        "lookup_record",
        "deploy_release",
        "ask_operator",
        "delegate_to_researcher",
        "delegate_to_child",
    }


async def test_drill_runs_a_side_effect_then_retryable_lookups(tmp_path):
    """The Host fault drill: an unmarked side-effecting call, then read-only lookups, then text."""
    recorder = JsonLinesRecorder(tmp_path / "calls.jsonl")
    result = await build_demo_agent(recorder=recorder).run("fault drill 0.01")
    tools = [part.tool_name for message in result.state.message_history for part in getattr(message, "tool_calls", [])]
    assert tools == ["slow_step", "lookup_record", "search_records"]
    assert result.output.startswith("Here is what I found")
    assert recorder.count("slow_step") == 1


def test_demo_tools_by_name():
    assert set(demo_tools()) == {
        "lookup_record",
        "search_records",
        "deploy_release",
        "ask_operator",
        "slow_step",
        "delegate_to_researcher",
        "delegate_to_child",
    }
