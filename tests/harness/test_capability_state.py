"""Capability state (spec B.12, 5.4)."""

from __future__ import annotations

import pytest
from pydantic import BaseModel
from pydantic_ai import ModelResponse, RunContext, TextPart, ToolCallPart, ToolReturnPart

from runs.harness import (
    AgentContext,
    AgentContextState,
    AgentContextStateSnapshot,
    AgentDefinition,
    CapabilityState,
    HarnessState,
    StateError,
    scripted_model,
)


class CounterState(BaseModel):
    value: int


async def test_missing_namespace_reads_none():
    """T22."""
    assert await AgentContextState().read("acme.counter", CounterState, version="1") is None


async def test_write_then_read_and_snapshot():
    """T23."""
    state = AgentContextState()
    await state.write("acme.counter", CounterState(value=1), version="1")
    assert (await state.read("acme.counter", CounterState, version="1")).value == 1
    snapshot = await state.snapshot()
    assert snapshot.model_dump(mode="json")["entries"]["acme.counter"] == {"version": "1", "data": {"value": 1}}


async def test_version_mismatch_is_a_clear_error():
    """T24."""
    state = AgentContextState()
    await state.write("acme.counter", CounterState(value=1), version="1")
    with pytest.raises(StateError) as error:
        await state.read("acme.counter", CounterState, version="2")
    assert error.value.code == "capability_state_version_unsupported"
    assert error.value.details == {"capability_id": "acme.counter", "expected_version": "2", "actual_version": "1"}


async def test_payload_of_the_wrong_shape_is_invalid():
    """T25."""
    snapshot = AgentContextStateSnapshot(entries={"acme.counter": CapabilityState(version="1", data={"value": "x"})})
    with pytest.raises(StateError) as error:
        await AgentContextState(snapshot).read("acme.counter", CounterState, version="1")
    assert error.value.code == "capability_state_invalid"


@pytest.mark.parametrize("blank", ["", "  "])
async def test_blank_ids_and_versions_are_rejected(blank):
    """T26."""
    state = AgentContextState()
    for call in (
        state.read(blank, CounterState, version="1"),
        state.write(blank, CounterState(value=1), version="1"),
    ):
        with pytest.raises(StateError) as error:
            await call
        assert error.value.code == "capability_state_id_invalid"
    for call in (
        state.read("acme.counter", CounterState, version=blank),
        state.write("acme.counter", CounterState(value=1), version=blank),
    ):
        with pytest.raises(StateError) as error:
            await call
        assert error.value.code == "capability_state_version_invalid"


async def test_writing_a_new_version_replaces_the_namespace():
    """T27."""
    state = AgentContextState()
    await state.write("acme.counter", CounterState(value=1), version="1")
    await state.write("acme.counter", CounterState(value=7), version="2")
    assert (await state.read("acme.counter", CounterState, version="2")).value == 7
    assert (await state.snapshot()).get("acme.counter") == CapabilityState(version="2", data={"value": 7})


def _counter_script(messages, info):
    if any(isinstance(p, ToolReturnPart) for p in messages[-1].parts):
        return ModelResponse(parts=[TextPart("counted")])
    return ModelResponse(parts=[ToolCallPart("count", {}, tool_call_id="count-1")])


async def count(ctx: RunContext[AgentContext]) -> int:
    """The contract's capability-state sample, as written, inside a tool."""
    context = ctx.deps
    current = await context.state.read("acme.counter", CounterState, version="1")
    await context.state.write(
        "acme.counter",
        CounterState(value=(current.value if current else 0) + 1),
        version="1",
    )
    return (current.value if current else 0) + 1


async def test_counter_increments_across_chained_runs_and_unknown_namespaces_travel():
    """T28, T29: three chained runs count to 3; an unread vendor namespace is kept byte for byte."""
    executable = AgentDefinition(model=scripted_model(_counter_script), tools=[count]).build()
    vendor = CapabilityState(version="9", data={"opaque": [1, {"b": 2, "a": 1}]})
    state = HarnessState.new(
        thread_id="thr_counter1", agent_context_state=AgentContextStateSnapshot(entries={"vendor.x": vendor})
    )
    for _ in range(3):
        result = await executable.run("count", previous_state=state)
        state = result.state

    assert state.agent_context_state.get("acme.counter").data == {"value": 3}
    assert state.agent_context_state.get("vendor.x") == vendor
    assert state.agent_context_state.get("vendor.x").data_json == vendor.data_json
