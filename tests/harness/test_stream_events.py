"""Harness stream items (spec 4.1, 4.2, 5.10)."""

from __future__ import annotations

import asyncio

import pytest
from pydantic_ai import ModelResponse, PartDeltaEvent, RunContext, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import FunctionModel

from runs.harness import (
    AgentContext,
    AgentDefinition,
    HarnessEvent,
    HarnessExtensionEvent,
    HarnessRunResultEvent,
    HarnessState,
    InputTextEvent,
    RunError,
    scripted_model,
)
from tests.support.factories import run_started_event
from tests.support.harness_streams import call_then_echo, collect


def _script(messages, info):
    if any(isinstance(p, ToolReturnPart) for p in messages[-1].parts):
        return ModelResponse(parts=[TextPart("finished the work")])
    return ModelResponse(parts=[TextPart("working on it"), ToolCallPart("step", {}, "s1")])


async def step(ctx: RunContext[AgentContext]) -> str:
    await ctx.deps.emit(HarnessExtensionEvent(kind="tool", payload={"type": "progress", "done": 1}))
    return "ok"


def executable():
    return AgentDefinition(model=scripted_model(_script, chunk=4), tools=[step]).build()


async def test_run_items_start_with_run_started_and_end_with_the_result():
    """T86: sequence 0 is run_started, the last item is the result, root sequences are contiguous."""
    stream = executable().stream("go")
    items = await collect(stream)

    first, last = items[0], items[-1]
    assert isinstance(first, HarnessEvent)
    assert first.event == run_started_event()
    assert isinstance(last, HarnessRunResultEvent)
    assert last.result.status == "completed"
    assert [item.sequence for item in items] == list(range(len(items)))
    assert {(item.thread_id, item.run_id) for item in items} == {(stream.thread_id, stream.run_id)}
    assert all(item.occurred_at.tzinfo is not None for item in items)
    assert any(isinstance(item.event, PartDeltaEvent) for item in items[:-1])
    payload_types = [item.event.payload_type for item in items[:-1] if isinstance(item.event, HarnessExtensionEvent)]
    assert payload_types == [
        "run_started",
        "model_request_started",
        "model_request_completed",
        "progress",
        "model_request_started",
        "model_request_completed",
    ]


async def test_capabilities_cannot_announce_a_run_start():
    """T88."""

    async def impostor(ctx: RunContext[AgentContext]) -> str:
        try:
            await ctx.deps.emit(run_started_event())
        except RunError as error:
            return error.code
        return "accepted"

    script = call_then_echo("impostor", "i1")
    result = await AgentDefinition(model=scripted_model(script), tools=[impostor]).build().run("go")
    assert result.output == "event_invalid"


async def test_streams_are_single_use():
    """T89: a second iteration or entry is refused with run_stream_reused."""
    stream = executable().stream("go")
    async with stream:
        async for _ in stream:
            pass
        with pytest.raises(RunError) as again:
            aiter(stream)
        assert again.value.code == "run_stream_reused"
    with pytest.raises(RunError) as reentered:
        async with stream:
            pass
    assert reentered.value.code == "run_stream_reused"
    with pytest.raises(RunError) as closed:
        aiter(stream)
    assert closed.value.code == "run_not_active"


async def test_iterating_before_entry_is_refused():
    with pytest.raises(RunError) as error:
        aiter(executable().stream("go"))
    assert error.value.code == "run_not_active"


async def test_each_run_of_a_thread_is_its_own_sequence_domain():
    """T90."""
    first = await collect(executable().stream("go", previous_state=HarnessState.new(thread_id="thr_seq1")))
    second = await collect(executable().stream("more", previous_state=first[-1].result.state))
    assert second[0].sequence == 0
    assert second[0].event == run_started_event()
    assert second[0].run_id != first[0].run_id
    assert second[0].thread_id == first[0].thread_id == "thr_seq1"


async def test_leaving_early_stops_the_run_and_closes_it():
    stream = executable().stream("go")
    async with stream:
        async for item in stream:
            if item.sequence == 2:
                break
    assert stream.result is None
    assert stream.outcome is None
    state = await stream.export_state()
    assert state.thread_id == stream.thread_id


async def test_invalid_arguments_fail_before_anything_runs() -> None:
    with pytest.raises(ValueError):
        executable().stream("go", tool_recovery="sometimes")
    with pytest.raises(RunError) as error:
        executable().stream("go", bindings=object())
    assert error.value.code == "run_bindings_invalid"
    with pytest.raises(RunError) as error:
        executable().stream("go", previous_state={"thread_id": "thr_x1"})
    assert error.value.code == "previous_state_invalid"
    for bad_input in (123, {"prompt": "go"}):
        with pytest.raises(RunError) as error:
            executable().stream(bad_input)
        assert error.value.code == "run_input_invalid"


async def test_a_stream_has_a_single_consumer():
    """§3.2: a second concurrent `__anext__` is refused with run_stream_concurrent_next."""
    release = asyncio.Event()

    async def waiting_model(messages, info):
        await release.wait()
        yield "done"

    stream = AgentDefinition(model=FunctionModel(stream_function=waiting_model)).build().stream("go")
    async with stream:
        items = aiter(stream)
        assert (await anext(items)).sequence == 0
        assert (await anext(items)).event == InputTextEvent(input_id="input-0", source="user", content="go")
        assert (await anext(items)).event.payload_type == "model_request_started"
        pending = asyncio.create_task(anext(items))
        await asyncio.sleep(0)
        with pytest.raises(RunError) as error:
            await anext(items)
        assert error.value.code == "run_stream_concurrent_next"
        release.set()
        assert (await pending).sequence == 3
        while not isinstance(await anext(items), HarnessRunResultEvent):
            pass
    assert stream.result.output == "done"


async def test_each_run_reports_its_prompt_and_the_steering_input_delivered_into_it():
    """T102: the run's own prompt, then content a tool enqueued while the run went on."""

    async def note(ctx: RunContext[AgentContext]) -> str:
        ctx.enqueue("Also check REC-9, please.")
        return "noted"

    def script(messages, info):
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("note", {}, tool_call_id="n1")])
        return ModelResponse(parts=[TextPart("done")])

    stream = AgentDefinition(model=scripted_model(script), tools=[note]).build().stream("look up REC-7")
    async with stream:
        inputs = [item.event async for item in stream if isinstance(getattr(item, "event", None), InputTextEvent)]

    assert inputs == [
        InputTextEvent(input_id="input-0", source="user", content="look up REC-7"),
        InputTextEvent(input_id="input-1", source="steering", content="Also check REC-9, please."),
    ]
    assert stream.result.status == "completed"
    resumed = AgentDefinition(model=scripted_model(script)).build().stream(previous_state=stream.result.state)
    async with resumed:
        assert not [item async for item in resumed if isinstance(getattr(item, "event", None), InputTextEvent)]
