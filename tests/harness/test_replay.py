"""`Replay`: a recording answers the model and the tools; the first step that asks otherwise is the divergence."""

from __future__ import annotations

import pytest
from pydantic_ai import Agent, ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo
from pydantic_ai.toolsets import FunctionToolset

from runs.harness import Replay, ReplayDiverged, scripted_model

calls: list[str] = []


def lookup(record_id: str) -> str:
    """Read a record."""
    calls.append(record_id)
    return f"{record_id} is live"


def _script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if any(isinstance(part, ToolReturnPart) for message in messages for part in message.parts):
        return ModelResponse(parts=[TextPart("42")])
    return ModelResponse(parts=[ToolCallPart("lookup", {"record_id": "REC-7"}, tool_call_id="call-1")])


def recording() -> list[ModelMessage]:
    agent = Agent(scripted_model(_script), toolsets=[FunctionToolset([lookup])])
    messages = agent.run_sync("look up REC-7").all_messages()
    calls.clear()
    return messages


def replayed(recorded: list[ModelMessage], *, output_type: type = str) -> Replay:
    replay = Replay(recorded)
    agent = Agent(replay.model(), toolsets=[replay.wrap(FunctionToolset([lookup]))], output_type=output_type)
    try:
        agent.run_sync("look up REC-7")
    except ReplayDiverged:
        return replay
    replay.finish()
    return replay


def test_an_unchanged_agent_replays_equal_and_no_tool_runs():
    replay = replayed(recording())

    assert replay.divergence is None and replay.steps == 2
    assert calls == []


def test_a_model_asked_more_often_than_recorded_diverges():
    # A dict output refuses the recorded text "42", so the agent asks the model again.
    replay = replayed(recording(), output_type=dict)

    assert replay.divergence is not None
    assert (replay.divergence.step, replay.divergence.kind) == (3, "extra_request")
    assert replay.divergence.expected == "no request (the recording ends after 2)"
    assert "failed the application's validation" in replay.divergence.asked


def test_a_run_that_ends_before_the_recording_does_diverges():
    # A recording that went on after the answer the replay ends with.
    replay = Replay([*recording(), ModelResponse(parts=[TextPart("more")])])
    agent = Agent(replay.model(), toolsets=[replay.wrap(FunctionToolset([lookup]))])
    agent.run_sync("look up REC-7")

    assert replay.finish() is not None
    assert (replay.divergence.step, replay.divergence.kind) == (3, "ended_early")


def test_another_prompt_diverges_at_the_first_request():
    replay = Replay(recording())
    agent = Agent(replay.model(), toolsets=[replay.wrap(FunctionToolset([lookup]))])

    with pytest.raises(ReplayDiverged) as diverged:
        agent.run_sync("look up REC-8")

    assert diverged.value.divergence.summary() == (
        "step 1 (request): expected user-prompt look up REC-7; asked user-prompt look up REC-8"
    )
