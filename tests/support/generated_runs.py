"""Hypothesis strategies for whole Harness Run streams built from native pydantic-ai events.

A generated run starts, makes one to three model requests whose responses stream text, thinking and tool
call parts in the shapes providers produce (with or without a start event, content on start or in deltas,
signatures early or late, provider ids or none), answers some tool calls, and ends completed, failed,
cancelled, suspended on approvals and external calls, or not at all (the stream died). Failing and cancelled
runs may stop mid-part. With `children`, a `delegate` tool call runs an inline child (and maybe a
grandchild) whose items sit between its delegation facts, and may be cut off mid-part before the parent
reports it completed or failed. Provider ids are either unique or numbered per response (`call_0`, `msg_1`),
as some OpenAI-compatible servers do, so they repeat across responses and between parent and child.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st
from pydantic_ai import (
    FinalResultEvent,
    FunctionToolResultEvent,
    PartDeltaEvent,
    PartEndEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    ThinkingPart,
    ThinkingPartDelta,
    ToolCallPart,
    ToolCallPartDelta,
    ToolReturnPart,
)

from runs.harness import HarnessExtensionEvent
from tests.support.factories import SourceRun

_words = st.text(alphabet="abcdefghij é", min_size=0, max_size=6)
_chunks = st.lists(_words, min_size=1, max_size=4)


@dataclass
class Stream:
    """The items of a root stream under construction, in delivery order."""

    items: list[Any] = field(default_factory=list)
    counter: int = 0
    terminal: bool = False

    def next_id(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}-{self.counter}"


def _text_part(draw: st.DrawFn, stream: Stream, run: SourceRun, index: int) -> list[Any]:
    chunks = draw(_chunks)
    content = "".join(chunks)
    provider_id = draw(st.sampled_from([stream.next_id("msg"), f"msg_{index}", None]))
    shape = draw(st.sampled_from(["start", "deltas_only", "end_only"]))
    events: list[Any] = []
    if shape == "start":
        events.append(PartStartEvent(index=index, part=TextPart(chunks[0], id=provider_id)))
        events.extend(PartDeltaEvent(index=index, delta=TextPartDelta(chunk)) for chunk in chunks[1:])
    elif shape == "deltas_only":
        # Without a start event the observer mints the id, so the end must not bring a provider id.
        provider_id = None
        events.extend(PartDeltaEvent(index=index, delta=TextPartDelta(chunk)) for chunk in chunks)
    events.append(PartEndEvent(index=index, part=TextPart(content, id=provider_id)))
    return [run.item(event) for event in events]


def _thinking_part(draw: st.DrawFn, stream: Stream, run: SourceRun, index: int) -> list[Any]:
    chunks = draw(_chunks)
    content = "".join(chunks)
    signature = draw(st.none() | st.sampled_from(["sig-a", "sig-b"]))
    where = draw(st.sampled_from(["start", "delta", "end"]))
    shape = draw(st.sampled_from(["start", "deltas_only", "end_only"]))
    events: list[Any] = []
    if shape == "start":
        events.append(
            PartStartEvent(
                index=index,
                part=ThinkingPart(chunks[0], id="rs_same", signature=signature if where == "start" else None),
            )
        )
        events.extend(PartDeltaEvent(index=index, delta=ThinkingPartDelta(content_delta=c)) for c in chunks[1:])
    elif shape == "deltas_only":
        events.extend(PartDeltaEvent(index=index, delta=ThinkingPartDelta(content_delta=c)) for c in chunks)
    if signature is not None and where == "delta" and shape != "end_only":
        events.append(PartDeltaEvent(index=index, delta=ThinkingPartDelta(signature_delta=signature)))
    events.append(PartEndEvent(index=index, part=ThinkingPart(content, id="rs_same", signature=signature)))
    return [run.item(event) for event in events]


def _tool_part(
    draw: st.DrawFn, stream: Stream, run: SourceRun, index: int, name: str | None = None
) -> tuple[list[Any], ToolCallPart]:
    tool_name = name or draw(st.sampled_from(["weather", "search", "rm"]))
    call_id = draw(st.sampled_from([stream.next_id(f"call-{run.run_id}"), f"call_{index}"]))
    args = draw(
        st.none()
        | st.dictionaries(st.sampled_from(["city", "q", "n"]), st.integers(0, 9) | _words, max_size=3)
        | st.just('{"raw": true}')
    )
    events: list[Any] = []
    if draw(st.booleans()):
        events.append(PartStartEvent(index=index, part=ToolCallPart(tool_name, None, tool_call_id=call_id)))
        for piece in draw(st.lists(_words, max_size=3)):
            events.append(PartDeltaEvent(index=index, delta=ToolCallPartDelta(args_delta=piece)))
    call = ToolCallPart(tool_name, args, tool_call_id=call_id)
    events.append(PartEndEvent(index=index, part=call))
    return [run.item(event) for event in events], call


def _cut(draw: st.DrawFn, items: list[Any]) -> list[Any]:
    """Keep a prefix of a response: a run that fails or is cancelled may stop mid-part."""
    return items[: draw(st.integers(0, len(items)))]


@st.composite
def _run_body(draw: st.DrawFn, stream: Stream, run: SourceRun, *, children: int) -> tuple[list[ToolCallPart], bool]:
    """Append one run's requests to the stream; returns the unanswered tool calls and whether it stopped early."""
    pending: list[ToolCallPart] = []
    for request_index in range(draw(st.integers(1, 3))):
        stream.items.append(run.request(request_index))
        response: list[Any] = []
        calls: list[ToolCallPart] = []
        delegations: list[ToolCallPart] = []
        for index in range(draw(st.integers(0, 4))):
            kind = draw(
                st.sampled_from(["text", "thinking", "tool", "delegate"] if children else ["text", "thinking", "tool"])
            )
            if kind == "text":
                response.extend(_text_part(draw, stream, run, index))
            elif kind == "thinking":
                response.extend(_thinking_part(draw, stream, run, index))
            else:
                items, call = _tool_part(draw, stream, run, index, "delegate" if kind == "delegate" else None)
                response.extend(items)
                (delegations if kind == "delegate" else calls).append(call)
            if draw(st.integers(0, 5)) == 0:
                response.append(run.item(FinalResultEvent(tool_name=None, tool_call_id=None)))
        if draw(st.integers(0, 6)) == 0:
            stream.items.extend(_cut(draw, response))
            return pending + calls, True
        stream.items.extend(response)
        if draw(st.integers(0, 6)) == 0:
            stream.items.append(run.item(HarnessExtensionEvent(kind="diagnostic", payload={"note": "n"})))
        for call in delegations:
            _inline_child(draw, stream, run, call, children=children)
        for call in calls:
            answer = draw(st.sampled_from(["success", "structured", "failed", "none", "none"]))
            if answer == "none":
                pending.append(call)
            elif answer == "failed":
                part = ToolReturnPart(call.tool_name, "it broke", call.tool_call_id, outcome="failed")
                stream.items.append(run.item(FunctionToolResultEvent(part)))
            else:
                content = f"{call.tool_name} ok" if answer == "success" else {"value": [1, "two"]}
                part = ToolReturnPart(call.tool_name, content, call.tool_call_id)
                stream.items.append(run.item(FunctionToolResultEvent(part)))
    return pending, False


def _inline_child(draw: st.DrawFn, stream: Stream, parent: SourceRun, call: ToolCallPart, *, children: int) -> None:
    child = SourceRun(stream.next_id("run-child"), stream.next_id("thread").replace("-", "_"), clock_ms=3)
    stream.items.append(child.started())
    stream.items.append(
        child.delegation(
            "started", child, status="running", parent_run_id=parent.run_id, parent_tool_call_id=call.tool_call_id
        )
    )
    _, stopped = draw(_run_body(stream, child, children=children - 1))
    failed = stopped or draw(st.integers(0, 3)) == 0
    stream.items.append(
        parent.delegation(
            "failed" if failed else "completed",
            child,
            status="state_rejected" if failed else "completed",
            parent_run_id=parent.run_id,
            parent_tool_call_id=call.tool_call_id,
        )
    )
    part = ToolReturnPart("delegate", "child answered", call.tool_call_id, outcome="failed" if failed else "success")
    stream.items.append(parent.item(FunctionToolResultEvent(part)))


@st.composite
def generated_runs(draw: st.DrawFn, *, children: int = 0) -> Stream:
    """One root stream; `children` is the nesting depth of inline delegations allowed (0: a single run)."""
    stream = Stream()
    run = SourceRun("run-root", "thread_root")
    stream.items.append(run.started())
    pending, stopped = draw(_run_body(stream, run, children=children))
    if stopped:
        ending = draw(st.sampled_from(["failed", "cancelled", "none"]))
    else:
        endings = ["completed", "failed", "cancelled", "none"] + (["suspended"] * 4 if pending else [])
        ending = draw(st.sampled_from(endings))
    if ending == "completed":
        stream.items.append(
            run.completed(
                draw(st.sampled_from(["done", {"answer": 42}, [1, 2]])),
                input_tokens=5,
                output_tokens=draw(st.integers(0, 3)),
            )
        )
    elif ending == "failed":
        stream.items.append(run.failed("model_failed", "The model failed."))
    elif ending == "cancelled":
        stream.items.append(run.cancelled())
    elif ending == "suspended":
        # A numbered id may have been reused by a later response; only the latest call with an id is open.
        pending = list({call.tool_call_id: call for call in pending}.values())
        split = draw(st.integers(0, len(pending)))
        stream.items.append(run.suspended(approvals=pending[:split], calls=pending[split:]))
    stream.terminal = ending != "none"
    return stream
