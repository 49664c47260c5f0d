"""export_state during a stream (spec B.5, 5.5)."""

from __future__ import annotations

import pytest
from pydantic_ai import ModelRequest, ModelResponse, RunContext, TextPart, ToolCallPart, ToolReturnPart

from runs.harness import (
    AgentContext,
    AgentDefinition,
    HarnessRunResultEvent,
    HarnessState,
    RunBindings,
    StateError,
    is_unknown_result,
    scripted_model,
)


def _script(messages, info):
    if any(isinstance(p, ToolReturnPart) for p in messages[-1].parts):
        return ModelResponse(parts=[TextPart("All records are in order and nothing else needs doing today.")])
    return ModelResponse(parts=[TextPart("Let me look that up first."), ToolCallPart("lookup", {"q": "x"}, "c1")])


def lookup(q: str) -> str:
    return f"record {q}"


def executable():
    return AgentDefinition(model=scripted_model(_script, chunk=5), tools=[lookup]).build()


def fresh_bindings() -> RunBindings:
    return RunBindings()


def _dump(messages):
    from pydantic_ai import ModelMessagesTypeAdapter

    return ModelMessagesTypeAdapter.dump_python(list(messages), mode="json")


async def test_seed_sample_exports_during_the_stream():
    """T30 / the contract's "Exporting while streaming" sample: each candidate is a complete prefix of the next."""
    candidates = []
    async with executable().stream("Work", bindings=fresh_bindings()) as stream:
        async for item in stream:
            checkpoint_candidate = await stream.export_state()
            candidates.append((item, checkpoint_candidate))

    final = stream.result.state
    for _, candidate in candidates:
        assert candidate.thread_id == stream.thread_id
        history = _dump(candidate.message_history)
        assert history == _dump(final.message_history)[: len(history)]
        for message in candidate.message_history:
            assert message.state == "complete"
            for part in message.parts:
                if isinstance(part, TextPart):
                    # Text parts are whole, never a streamed fragment.
                    assert part.content in {
                        "Let me look that up first.",
                        "All records are in order and nothing else needs doing today.",
                    }
    lengths = [len(candidate.message_history) for _, candidate in candidates]
    assert lengths == sorted(lengths)
    assert lengths[-1] == 4


async def test_export_before_entry_is_refused():
    """T31."""
    with pytest.raises(StateError) as error:
        await executable().stream("Work").export_state()
    assert error.value.code == "run_not_active"


async def test_export_after_close_is_the_result_state():
    """T32."""
    stream = executable().stream("Work")
    async with stream:
        async for _ in stream:
            pass
    assert await stream.export_state() == stream.result.state


async def test_export_after_close_without_any_state_is_unavailable(monkeypatch):
    """T33: a run that died without an outcome and whose teardown export failed has nothing to export."""

    async def sabotage(ctx: RunContext[AgentContext]) -> str:
        async def broken_snapshot():
            raise RuntimeError("snapshot store gone")

        monkeypatch.setattr(ctx.deps.state, "snapshot", broken_snapshot)
        raise LookupError("a bug in a tool")

    def script(messages, info):
        return ModelResponse(parts=[ToolCallPart("sabotage", {}, "c1")])

    stream = AgentDefinition(model=scripted_model(script), tools=[sabotage]).build().stream("go")
    with pytest.raises(LookupError):
        async with stream:
            async for _ in stream:
                pass
    assert stream.outcome is None
    with pytest.raises(StateError) as error:
        await stream.export_state()
    assert error.value.code == "run_state_unavailable"
    assert isinstance(error.value.__cause__, RuntimeError)


async def test_never_mode_export_already_holds_the_unknown_result():
    """T34: the prepared history is what an early export returns."""
    checkpoint = HarnessState.new(
        thread_id="thr_checkpoint1",
        message_history=[
            ModelRequest.user_text_prompt("go"),
            ModelResponse(parts=[ToolCallPart("lookup", {"q": "x"}, "c1")]),
        ],
    )
    stream = executable().stream(previous_state=checkpoint, tool_recovery="never")
    async with stream:
        items = aiter(stream)
        first = await anext(items)
        assert first.sequence == 0
        candidate = await stream.export_state()
        while not isinstance(await anext(items), HarnessRunResultEvent):
            pass

    closing = candidate.message_history[2]
    assert isinstance(closing, ModelRequest)
    assert [p.tool_call_id for p in closing.parts if is_unknown_result(p)] == ["c1"]


async def test_export_is_a_read_not_a_commit():
    """T35: exporting after every item leaves the result exactly as a run without exports."""
    quiet = executable().stream("Work", previous_state=HarnessState.new(thread_id="thr_quiet1"))
    async with quiet:
        async for _ in quiet:
            pass
    busy = executable().stream("Work", previous_state=HarnessState.new(thread_id="thr_quiet1"))
    async with busy:
        async for item in busy:
            await busy.export_state()
            await busy.export_state()
            if isinstance(item, HarnessRunResultEvent):
                break

    def shape(state):
        return [
            (type(m).__name__, [(type(p).__name__, getattr(p, "content", None)) for p in m.parts])
            for m in state.message_history
        ]

    assert shape(busy.result.state) == shape(quiet.result.state)
    assert busy.result.state.agent_context_state == quiet.result.state.agent_context_state
