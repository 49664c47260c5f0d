"""Benchmark: `harness_replay`'s replay (no model) of a 45-tool-round execution, against that execution's own run.

Not the websocket replay of a timeline (`bench.replay`): this one replays an execution's recorded model responses
and tool results through the current agent definition (`runs.services.worker.replay.replay_execution`).

The baseline is the original: an execution of a profile whose model is a scripted one (`model` below, set as the
Host's demo model for the benchmark) that calls `lookup_record` once per round for `ROUNDS` rounds and then
answers, run through the worker's in-process path (`runner.execute_run`), so its time is the Host's own (the
scripted model answers at once; the tool is the demo's lookup). Each repetition runs a new original, then replays
the latest one; the subject is the replay's wall time, which includes reading the recording from the journal and
creating the replay's thread, execution and run.
"""

from __future__ import annotations

import re

from pydantic_ai import ModelMessage, ModelResponse, TextPart, ToolCallPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from runs.harness import scripted_model

from .context import BenchContext
from .measure import Comparison, Report, measure_pair, stopwatch

__all__ = ("model", "run")

ROUNDS = 45
QUICK_ROUNDS = 10
_PROFILE = "bench-replay"
_INSTRUCTIONS = "Look the records up one at a time, then say you are done."


def _rounds(messages: list[ModelMessage]) -> int:
    """The number of rounds the prompt asks for ("look up 45 records")."""
    for message in messages:
        for part in getattr(message, "parts", ()):
            if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                found = re.search(r"\d+", part.content)
                if found:
                    return int(found.group())
    return ROUNDS


def _script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    turn = sum(isinstance(message, ModelResponse) for message in messages)
    if turn >= _rounds(messages):
        return ModelResponse(parts=[TextPart(f"All {turn} records are looked up.")])
    return ModelResponse(
        parts=[
            TextPart(f"Looking up record {turn}."),
            ToolCallPart("lookup_record", {"record_id": f"REC-{turn}"}, tool_call_id=f"call-{turn}"),
        ]
    )


def model() -> FunctionModel:
    """The scripted model the original runs with (`HARNESS_DEMO_MODEL` during the benchmark)."""
    return scripted_model(_script)


def run(context: BenchContext) -> Report:
    from django.test import override_settings

    from runs.models import AgentProfile, Execution, ExecutionStatus
    from runs.services.lifecycle import executions
    from runs.services.worker import runner
    from runs.services.worker.replay import replay_execution

    rounds = QUICK_ROUNDS if context.quick else ROUNDS
    report = Report("model_replay", context.database, context.quick, context.repeats)
    profile, _ = AgentProfile.objects.get_or_create(
        name=_PROFILE, defaults={"model": "demo", "instructions": _INSTRUCTIONS, "enabled_tools": ["lookup_record"]}
    )
    originals: list[Execution] = []

    def original() -> float:
        execution = executions.start_execution(
            executions.create_thread(profile, title="bench replay original"), f"Look up {rounds} records"
        )
        with stopwatch() as elapsed:
            runner.execute_run(execution.runs.get().pk)
        execution.refresh_from_db()
        if execution.status != ExecutionStatus.COMPLETED:
            raise RuntimeError(f"the original ended {execution.status}: {execution.failure_message}")
        originals.append(execution)
        return elapsed()

    def replayed() -> float:
        with stopwatch() as elapsed:
            outcome = replay_execution(originals[-1])
        if not outcome.equal:
            raise RuntimeError(f"the replay diverged: {outcome.summary()}")
        return elapsed()

    with override_settings(HARNESS_DEMO_MODEL=f"{__name__}.model"):
        original()  # the first recording to replay, and the original's warm-up
        subject, baseline = measure_pair(replayed, original, context.repeats, warmup=1)
    report.add(
        Comparison(
            name="replay",
            size=f"{rounds} rounds",
            items=rounds,
            subject=subject,
            baseline=baseline,
            baseline_name="the original execution run by the worker's in-process path with a scripted model",
            target=None,
            extra={"tool_rounds": rounds, "model_requests": rounds + 1},
        )
    )
    report.notes.append(
        f"items = tool rounds ({rounds}, one `lookup_record` call each, then the answer); subject = "
        "`replay_execution` of the latest original (no model, tool results from the recording), baseline = a new "
        "original through `runner.execute_run` with a scripted model, interleaved repetition by repetition."
    )
    return report
