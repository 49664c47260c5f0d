"""Synthetic Harness runs for the benchmarks, produced by the real engine with a scripted model.

Every model turn streams a thinking part, a text part (both in small deltas) and one tool call; the second
turn and every `CHILD_EVERY`-th after it delegate to an inline child run (the engine's own
`inline_delegation_tool`), so the stream also carries delegation events and forwarded child items. The run has
the worker's `CheckpointBoundaries` capability, and the generator does at each boundary what the worker does:
it takes `export_state()` (kept with the items, so a replay can write the same checkpoints) and releases the
gate. Turns continue until the wanted item count is about reached, so a "10k" run holds about 10,000 items.
Runs are generated once per size and cached in-process together with their encoded journal form (and on
disk for the next suite process, see `synthetic_run`).
"""

from __future__ import annotations

import asyncio
import functools
import os
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic_ai import ModelMessage, ModelResponse, TextPart, ThinkingPart, ToolCallPart, UsageLimits
from pydantic_ai.models.function import AgentInfo

from runs.harness import (
    AgentDefinition,
    CheckpointBoundaries,
    DeferredToolResume,
    EncodedItem,
    HarnessState,
    boundary_of,
    decode_item,
    encode_item,
    inline_delegation_tool,
    scripted_model,
)

__all__ = ("SIZES", "BoundaryState", "SyntheticRun", "synthetic_run")

SIZES = {"0.3k": 300, "1k": 1_000, "10k": 10_000, "20k": 20_000, "100k": 100_000}
CHILD_EVERY = 10
CHILD_TURNS = 1
THINKING = "Weighing which record to consult next and why it matters for the plan. " * 6
TEXT = "Here is what I found so far; the next lookup narrows the remaining questions down. " * 40
CHILD_TEXT = TEXT[:480]


@dataclass(frozen=True)
class BoundaryState:
    """What the worker stores at a boundary item: the exported state and the accepted input not yet in it."""

    position: int
    boundary: str
    state: HarnessState
    pending: DeferredToolResume | None


@dataclass(frozen=True, eq=False)
class SyntheticRun:
    """One generated root stream: items in root-stream order, their encoded journal rows, boundary states."""

    thread_id: str
    run_id: str
    items: tuple[Any, ...]
    encoded: tuple[EncodedItem, ...]
    boundaries: tuple[BoundaryState, ...]

    @property
    def size(self) -> int:
        return len(self.items)

    @property
    def child_run_ids(self) -> frozenset[str]:
        return frozenset(item.run_id for item in self.items if item.run_id != self.run_id)


def _turns_taken(messages: list[ModelMessage]) -> int:
    return sum(isinstance(message, ModelResponse) for message in messages)


def _final_answer(text: str = TEXT) -> ModelResponse:
    return ModelResponse(parts=[ThinkingPart(THINKING), TextPart("All lookups are done. " + text)])


def _next_turn(turn: int, *, delegate: bool, text: str = TEXT) -> ModelResponse:
    call_id = f"call-{turn}"
    if delegate and turn % CHILD_EVERY == 1:
        call = ToolCallPart("delegate_to_researcher", {"task": f"question {turn}"}, tool_call_id=call_id)
    else:
        call = ToolCallPart("lookup", {"key": f"record-{turn}"}, tool_call_id=call_id)
    return ModelResponse(parts=[ThinkingPart(THINKING), TextPart(text), call])


def _child_script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    turn = _turns_taken(messages)
    if turn >= CHILD_TURNS:
        return _final_answer(CHILD_TEXT)
    return _next_turn(turn, delegate=False, text=CHILD_TEXT)


def lookup(key: str) -> str:
    """Return the stored record for a key."""
    return f"record {key}: nothing unusual"


async def _generate(target: int) -> tuple[list[Any], list[BoundaryState]]:
    items: list[Any] = []
    boundaries: list[BoundaryState] = []

    def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        # The model is asked only after the previous turn's items were consumed (the boundary gate holds the
        # producer until the consumer caught up), so this count says whether one more turn still fits.
        turn = _turns_taken(messages)
        per_turn = len(items) / turn if turn else 0
        if turn and len(items) + 1.5 * per_turn > target:
            return _final_answer()
        return _next_turn(turn, delegate=True)

    researcher = AgentDefinition[str](name="researcher", model=scripted_model(_child_script), tools=[lookup]).build()
    gate = CheckpointBoundaries()
    executable = AgentDefinition[str](
        name="bench",
        model=scripted_model(script),
        tools=[lookup, inline_delegation_tool(researcher)],
        capabilities=[gate],
    ).build()
    # A long synthetic run exceeds pydantic-ai's default request limit on purpose.
    stream = executable.stream(
        "Plan the migration", previous_state=HarnessState.new(), usage_limits=UsageLimits(request_limit=None)
    )
    gate.bind(stream.run_id)
    async with stream:
        async for item in stream:
            items.append(item)
            boundary = boundary_of(item, stream.run_id)
            if boundary is not None:
                state = await stream.export_state()
                boundaries.append(BoundaryState(len(items) - 1, boundary, state, stream.pending_deferred_input))
                gate.release()
    return items, boundaries


@functools.cache
def synthetic_run(items: int) -> SyntheticRun:
    """A generated run of about `items` source items (cached in-process, and on disk for sibling suites).

    With `BENCH_CACHE_DIR` set, the encoded rows and boundary states are kept there, so the next suite process
    (another database) decodes the same run instead of generating it again: the same items, through the codec.
    """
    cache_dir = os.environ.get("BENCH_CACHE_DIR")
    cached = Path(cache_dir) / f"synthetic-{items}.pickle" if cache_dir else None
    if cached is not None and cached.exists():
        thread_id, run_id, encoded, boundaries = pickle.loads(cached.read_bytes())
        decoded = tuple(decode_item(entry.payload, entry.codec_version) for entry in encoded)
        return SyntheticRun(thread_id, run_id, decoded, encoded, boundaries)
    generated, boundaries = asyncio.run(_generate(items))
    root = generated[0]
    run = SyntheticRun(
        thread_id=root.thread_id,
        run_id=root.run_id,
        items=tuple(generated),
        encoded=tuple(encode_item(item) for item in generated),
        boundaries=tuple(boundaries),
    )
    if cached is not None:
        cached.write_bytes(pickle.dumps((run.thread_id, run.run_id, run.encoded, run.boundaries), protocol=5))
    return run
