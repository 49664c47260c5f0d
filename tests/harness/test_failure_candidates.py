"""Failure and cancellation candidates, cleanup errors (spec B.11, 5.9)."""

from __future__ import annotations

import asyncio
import json

import pytest
from pydantic_ai import (
    FunctionToolCallEvent,
    ModelRequest,
    ModelResponse,
    PartDeltaEvent,
    RunContext,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UsageLimits,
)
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.models.function import DeltaThinkingPart, DeltaToolCall, FunctionModel

from runs.harness import (
    INTERRUPTED_TOOL_RESULT,
    AgentContext,
    AgentDefinition,
    HarnessExtensionEvent,
    HarnessRunResultEvent,
    RunCleanupError,
    is_unknown_result,
    scripted_model,
)


def streaming_model(*chunks):
    """A model that streams `chunks` and then fails like a provider returning HTTP 400."""

    async def stream(messages, info):
        for chunk in chunks:
            yield chunk
        raise ModelHTTPError(status_code=400, model_name="scripted", body={"error": "bad request"})

    return FunctionModel(stream_function=stream)


def lookup(q: str) -> str:
    return q


async def test_failed_run_keeps_finished_thinking_and_streamed_text():
    """T79: finished thinking (with signature) and text "Hel"+"lo" survive; the unfinished call does not."""
    model = streaming_model(
        {0: DeltaThinkingPart(content="plan", signature="sig-1")},
        "Hel",
        "lo",
        {2: DeltaToolCall(name="lookup", json_args='{"q": "un', tool_call_id="c1")},
    )
    stream = AgentDefinition(model=model, tools=[lookup]).build().stream("go")
    async with stream:
        items = [item async for item in stream]
    result = stream.result

    assert result.status == "failed"
    assert result.failure.code == "model_http_error"
    assert result.failure.details["status_code"] == 400
    assert isinstance(stream.diagnostic_error, ModelHTTPError)
    lifecycle = [item.event.payload_type for item in items[:-1] if isinstance(item.event, HarnessExtensionEvent)]
    assert lifecycle == ["run_started", "model_request_started", "model_request_failed"]
    assert result.failure.retry_hint == "dependency_change"
    assert "bad request" not in result.failure.model_dump_json()
    tail = result.state.message_history[-1]
    assert isinstance(tail, ModelResponse)
    assert tail.state == "interrupted"
    assert [type(part) for part in tail.parts] == [ThinkingPart, TextPart]
    assert (tail.parts[0].content, tail.parts[0].signature) == ("plan", "sig-1")
    assert tail.parts[1].content == "Hello"


async def test_unfinished_thinking_is_dropped():
    """T79: thinking still streaming when the error hits is not part of the candidate."""
    model = streaming_model("Visible", {1: DeltaThinkingPart(content="half a tho")})
    result = await AgentDefinition(model=model).build().run("go")
    assert result.state.message_history[-1].parts == [TextPart("Visible")]


async def test_error_before_any_part_drops_the_response():
    """T80."""
    result = await AgentDefinition(model=streaming_model()).build().run("go")
    assert result.status == "failed"
    assert [type(m) for m in result.state.message_history] == [ModelRequest]


async def test_finalised_call_without_result_gets_an_unknown_result():
    """T81: a call that finished streaming before the error is closed with an unknown result."""
    model = streaming_model(
        {0: DeltaToolCall(name="lookup", json_args='{"q": "x"}', tool_call_id="c1")},
        "and now",
    )
    result = await AgentDefinition(model=model, tools=[lookup]).build().run("go")

    *_, response, closing = result.state.message_history
    assert [part.tool_call_id for part in response.parts if hasattr(part, "tool_call_id")] == ["c1"]
    [unknown] = closing.parts
    assert is_unknown_result(unknown)
    assert unknown.tool_call_id == "c1"
    assert unknown.content == INTERRUPTED_TOOL_RESULT


def _tool_loop(messages, info):
    return ModelResponse(parts=[ToolCallPart("lookup", {"q": str(len(messages))}, tool_call_id=f"c{len(messages)}")])


async def test_usage_limit_gives_a_failed_result_with_state():
    """T83."""
    executable = AgentDefinition(model=scripted_model(_tool_loop), tools=[lookup]).build()
    result = await executable.run("loop", usage_limits=UsageLimits(request_limit=2))

    assert result.status == "failed"
    assert result.failure.code == "usage_limit_exceeded"
    assert result.failure.retry_hint == "dependency_change"
    assert result.output is None
    assert any(isinstance(p, ToolReturnPart) for m in result.state.message_history for p in m.parts)


async def test_cleanup_failure_withholds_the_terminal_item():
    """T84: a failing run-scoped cleanup turns the completed candidate into RunCleanupError.outcome."""

    async def broken_cleanup() -> None:
        raise OSError("could not release the workspace")

    async def open_workspace(ctx: RunContext[AgentContext]) -> str:
        ctx.deps.add_cleanup(broken_cleanup)
        return "opened"

    def script(messages, info):
        if any(isinstance(p, ToolReturnPart) for p in messages[-1].parts):
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(parts=[ToolCallPart("open_workspace", {}, tool_call_id="w1")])

    stream = AgentDefinition(model=scripted_model(script), tools=[open_workspace]).build().stream("go")
    items = []
    with pytest.raises(RunCleanupError) as error:
        async with stream:
            async for item in stream:
                items.append(item)

    assert error.value.code == "run_cleanup_failed"
    assert error.value.retry_hint == "new_run"
    assert error.value.outcome.status == "completed"
    assert any(isinstance(cause, OSError) for cause in error.value.causes)
    assert not any(isinstance(item, HarnessRunResultEvent) for item in items)
    assert stream.result is None
    assert stream.outcome is not None and stream.outcome.status == "completed"
    assert await stream.export_state() == error.value.outcome.state


async def test_cancel_during_a_tool_call():
    """T85: cancelling while a tool runs ends the run cancelled, with no output and a safe state."""
    started = asyncio.Event()

    async def slow_job(ctx: RunContext[AgentContext]) -> str:
        started.set()
        await asyncio.Event().wait()
        return "never"

    def script(messages, info):
        return ModelResponse(parts=[TextPart("Starting"), ToolCallPart("slow_job", {}, tool_call_id="j1")])

    stream = AgentDefinition(model=scripted_model(script), tools=[slow_job]).build().stream("go")
    async with stream:
        async for item in stream:
            if isinstance(getattr(item, "event", None), FunctionToolCallEvent):
                await started.wait()
                stream.cancel()

    result = stream.result
    assert result.status == "cancelled"
    assert result.output is None
    assert result.failure is None
    history = result.state.message_history
    assert any(is_unknown_result(p) and p.tool_call_id == "j1" for p in history[-1].parts)
    assert json.loads(result.state.model_dump_json())["thread_id"] == stream.thread_id


async def test_cancel_before_entry_runs_nothing():
    calls = []

    def script(messages, info):
        calls.append(messages)
        return ModelResponse(parts=[TextPart("hi")])

    stream = AgentDefinition(model=scripted_model(script)).build().stream("go")
    stream.cancel()
    async with stream:
        items = [item async for item in stream]
    assert calls == []
    assert items[-1].result.status == "cancelled"
    assert items[-1].result.state is None


async def test_cleanup_failure_after_a_run_error_lists_the_run_error_first():
    """S82: when the run itself broke and teardown failed too, the run's error is the first cause."""

    async def broken_cleanup() -> None:
        raise OSError("could not release the workspace")

    async def crash(ctx: RunContext[AgentContext]) -> str:
        ctx.deps.add_cleanup(broken_cleanup)
        raise LookupError("a bug in a tool")

    def script(messages, info):
        return ModelResponse(parts=[ToolCallPart("crash", {}, "x1")])

    stream = AgentDefinition(model=scripted_model(script), tools=[crash]).build().stream("go")
    with pytest.raises(RunCleanupError) as error:
        async with stream:
            async for _ in stream:
                pass
    assert [type(cause) for cause in error.value.causes] == [LookupError, OSError]
    assert error.value.outcome is None
    assert error.value.details == {"cause_count": 2}


async def test_cancel_while_text_streams_keeps_the_streamed_text():
    """S80: a cancelled response keeps the text that was streamed, as an interrupted response."""

    async def stalling(messages, info):
        yield "Hel"
        yield "lo"
        await asyncio.Event().wait()
        yield "never"

    stream = AgentDefinition(model=FunctionModel(stream_function=stalling)).build().stream("go")
    async with stream:
        async for item in stream:
            event = getattr(item, "event", None)
            if isinstance(event, PartDeltaEvent):
                stream.cancel()

    result = stream.result
    assert result.status == "cancelled"
    tail = result.state.message_history[-1]
    assert isinstance(tail, ModelResponse)
    assert tail.state == "interrupted"
    assert tail.parts == [TextPart("Hello")]


def _unknown_tool(messages, info):
    return ModelResponse(parts=[ToolCallPart("no_such_tool", {}, tool_call_id=f"u{len(messages)}")])


async def test_an_agent_run_error_keeps_its_type_and_message_in_the_details():
    executable = AgentDefinition(model=scripted_model(_unknown_tool), tools=[lookup]).build()
    result = await executable.run("call something that does not exist")

    assert result.status == "failed"
    assert result.failure.code == "agent_run_failed"
    assert result.failure.details["error_type"] == "UnexpectedModelBehavior"
    assert "no_such_tool" in result.failure.details["error_message"]
