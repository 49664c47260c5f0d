"""Benchmark: the cost of hosting, on one run of `DELTAS` streamed text deltas.

Three subjects over the same `FunctionModel` stream, timed in turn repetition by repetition in one process:
bare pydantic-ai (`Agent.iter`, every node's events streamed and dropped), the harness engine alone
(`ExecutableAgent.stream`, every item consumed), and the whole Host (`runner.aexecute_run` of a queued Run on the
worker's event loop, as the RQ worker runs a job: lease, engine, journal and timeline rows through the
`BatchWriter`, boundary and terminal checkpoints, publication to the real Redis channel layer, the outcome).
Ratios are each subject's time over the bare run's.

The case also reports the Host run's checkpoint bytes against its journal bytes, and the Host's cost per delta
beyond bare pydantic-ai (one process does all the work, so its time is mostly its CPU).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models.function import AgentInfo, DeltaToolCalls, FunctionModel

from .context import BenchContext
from .measure import Comparison, Report, Stats, Target, measure_interleaved, stopwatch

__all__ = ("run",)

DELTAS = 20_000
QUICK_DELTAS = 2_000
HOST_TARGET = Target("slowdown", "<=", 1.3, "whole Host within 1.3x of bare pydantic-ai")
ENGINE_TARGET = Target("slowdown", "<=", 1.15, "harness engine within 1.15x of bare pydantic-ai")
PER_DELTA_TARGET = Target("median", "<=", 40.0, "Host cost per delta beyond bare pydantic-ai at most 40 µs")


def _model(deltas: int) -> FunctionModel:
    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
        for number in range(deltas):
            yield f"w{number} "

    return FunctionModel(stream_function=stream)


_host_deltas = DELTAS


def host_model() -> FunctionModel:
    """The Host subject's "demo" model, named by HARNESS_DEMO_MODEL while the benchmark runs."""
    return _model(_host_deltas)


def _bare(deltas: int) -> float:
    agent = Agent(_model(deltas))

    async def drive() -> float:
        with stopwatch() as elapsed:
            async with agent.iter("go") as agent_run:
                async for node in agent_run:
                    if Agent.is_model_request_node(node) or Agent.is_call_tools_node(node):
                        async with node.stream(agent_run.ctx) as events:
                            async for _ in events:
                                pass
        return elapsed()

    return asyncio.run(drive())


def _engine(deltas: int) -> float:
    from runs.harness import AgentDefinition, RunBindings

    executable = AgentDefinition[str](name="bench", model=_model(deltas)).build()

    async def drive() -> float:
        with stopwatch() as elapsed:
            async with executable.stream("go", bindings=RunBindings()) as stream:
                async for _ in stream:
                    pass
        return elapsed()

    return asyncio.run(drive())


class _Host:
    """Queued Runs of a profile whose "demo" model is the delta stream, executed as the worker executes a job."""

    def __init__(self, deltas: int) -> None:
        from django.conf import settings

        from runs import demo_profile
        from runs.services.lifecycle import executions

        global _host_deltas
        # The Host builds the "demo" model from HARNESS_DEMO_MODEL; here that model streams the benchmark's deltas
        # instead, and nothing is enqueued on RQ (the benchmark calls the job itself).
        _host_deltas = deltas
        settings.HARNESS_DEMO_MODEL = f"{__name__}.host_model"
        self.deltas = deltas
        # Rebinds the name `executions` imported (not one it exports): the benchmark calls the job itself.
        executions.enqueue_run = lambda run: None  # type: ignore[attr-defined]
        self.profile = demo_profile.ensure_demo_profile()
        self.profile.enabled_tools = []
        self.profile.save(update_fields=["enabled_tools"])
        self.last_run: Any = None

    def __call__(self) -> float:
        from runs.services.lifecycle import executions
        from runs.services.worker import event_loop, runner

        thread = executions.create_thread(self.profile, title="hosting bench")
        run = executions.start_execution(thread, "go").runs.get()
        # As the RQ worker runs a job: `aexecute_run` on the worker's event loop, database work in its thread.
        with stopwatch() as elapsed, asyncio.Runner(loop_factory=event_loop.new_event_loop) as loop:
            outcome = loop.run(runner.aexecute_run(run.pk))
        assert outcome == "completed", outcome
        # The run must really have streamed the deltas (not, say, the demo agent's own model).
        assert run.journal.count() > self.deltas, "the Host did not run the benchmark's model"
        self.last_run = run
        return elapsed()

    def stored_bytes(self) -> dict[str, int]:
        from django.db.models import Sum
        from django.db.models.functions import Length

        from runs.models import Checkpoint, JournalEntry

        run = self.last_run
        checkpoints = Checkpoint.objects.filter(run=run).aggregate(
            state=Sum(Length("state_json")), delta=Sum(Length("history_delta"))
        )
        journal = JournalEntry.objects.filter(run=run).aggregate(payload=Sum(Length("payload")))
        return {
            "checkpoint_bytes": (checkpoints["state"] or 0) + (checkpoints["delta"] or 0),
            "journal_bytes": journal["payload"] or 0,
            "journal_items": JournalEntry.objects.filter(run=run).count(),
        }


def run(context: BenchContext) -> Report:
    report = Report("hosting", context.database, context.quick, context.repeats)
    deltas = QUICK_DELTAS if context.quick else DELTAS
    host = _Host(deltas)
    bare, engine, hosted = measure_interleaved(
        (lambda: _bare(deltas), lambda: _engine(deltas), host), context.repeats, warmup=1
    )
    stored = host.stored_bytes()
    size = f"{deltas // 1000}k"
    baseline_name = "bare pydantic-ai Agent.iter over the same FunctionModel stream, same process, interleaved"
    ratio = {"checkpoint_over_journal_bytes": stored["checkpoint_bytes"] / stored["journal_bytes"]}
    for name, subject, target, extra in (
        ("engine", engine, ENGINE_TARGET, {}),
        ("host", hosted, HOST_TARGET, {**stored, **ratio}),
    ):
        report.add(
            Comparison(
                name=name,
                size=size,
                items=deltas,
                subject=subject,
                baseline=bare,
                baseline_name=baseline_name,
                target=target,
                extra=extra,
            )
        )
    # Each repetition ran both back to back, so their difference is what hosting added to that repetition.
    beyond_bare = [(h - b) / deltas * 1e6 for h, b in zip(hosted.samples, bare.samples, strict=True)]
    report.add(
        Comparison(
            name="host cost per delta",
            size=size,
            items=0,
            subject=Stats.of(beyond_bare),
            baseline=None,
            baseline_name="",
            target=PER_DELTA_TARGET,
            unit="µs",
            extra={"bare_us_per_delta": bare.median / deltas * 1e6},
        )
    )
    report.notes.append(
        f"One model request streaming {deltas} text deltas (a {deltas}-item run). The Host subject includes taking "
        "the lease, loading the start checkpoint, building the agent, the journal, the timeline rows, the boundary "
        "and terminal checkpoints, publication to Redis and recording the outcome."
    )
    return report
