"""Replaying a recorded execution with no model and no side effects, as a new execution marked "replay of #N".

The current agent definition (a profile's instructions and tools, and the tools' current code: their names,
schemas and argument validation) runs against what the original execution recorded: each model request is
answered with the recorded response and each tool call with its recorded result (see `runs.harness.Replay`). The
replay runs in this process through the worker's own run loop, so its run, journal, checkpoints and timeline are
written as any run's are, on a new thread of the original's team; it never reaches RQ or a real model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction
from pydantic_ai import ModelMessage
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.toolsets import FunctionToolset

from runs.harness import (
    CODEC_VERSION,
    AgentDefinition,
    CodecError,
    Divergence,
    ExecutableAgent,
    HarnessRunResultEvent,
    Replay,
)
from runs.models import (
    AgentProfile,
    Execution,
    ExecutionStatus,
    ExecutionTrigger,
    JournalEntry,
    Run,
    RunReason,
)

from ..lifecycle.executions import create_thread, current_policy_version
from ..store import checkpoints, journal, toolbox
from ..store.agents import profile_snapshot
from . import runner

__all__ = ("ReplayOutcome", "ReplayRefused", "recorded_messages", "replay_execution")


class ReplayRefused(ValueError):
    """The execution cannot be replayed (still running, unreadable, not recorded); nothing was written."""


@dataclass(frozen=True, slots=True)
class ReplayOutcome:
    original: Execution
    replay: Execution
    divergence: Divergence | None
    steps: int

    @property
    def equal(self) -> bool:
        return self.divergence is None

    def summary(self) -> str:
        head = f"replay #{self.replay.pk} of #{self.original.pk}"
        if self.divergence is None:
            return f"{head}: equal ({self.steps} model responses)"
        return f"{head}: diverged at {self.divergence.summary()}"


def recorded_messages(original: Execution) -> list[ModelMessage]:
    """The messages `original` added to its thread, read from its journal; `ReplayRefused` says why not."""
    if original.status != ExecutionStatus.COMPLETED:
        raise ReplayRefused(
            f"execution #{original.pk} is {original.status}; only a completed execution is a whole recording"
        )
    newer = JournalEntry.objects.filter(run__execution=original, codec_version__gt=CODEC_VERSION).first()
    if newer is not None:
        raise ReplayRefused(
            f"execution #{original.pk} was journaled with codec version {newer.codec_version}; "
            f"this Host reads 1..{CODEC_VERSION}"
        )
    runs = list(original.runs.order_by("number"))
    last = JournalEntry.objects.filter(run=runs[-1], kind__startswith="result.").order_by("-index").first()
    if last is None:
        raise ReplayRefused(f"execution #{original.pk} has no journaled result (a redacted copy holds no journal)")
    try:
        item = journal.decoded(last)
        start = runs[0].start_checkpoint
        before = 0 if start is None else len(checkpoints.load(start).message_history)
    except (CodecError, journal.JournalError, checkpoints.CheckpointError) as exc:
        raise ReplayRefused(f"the recording of execution #{original.pk} cannot be read: {exc}") from exc
    assert isinstance(item, HarnessRunResultEvent)
    if item.result.state is None:
        raise ReplayRefused(f"the result of execution #{original.pk} holds no state")
    return list(item.result.state.message_history[before:])


def _profile(original: Execution, name: str | None) -> AgentProfile:
    if name is None:
        return original.thread.profile
    profile = AgentProfile.objects.filter(name=name, team_id=original.thread.team_id).first()
    if profile is None:
        raise ReplayRefused(f"the team of execution #{original.pk} has no profile named {name!r}")
    return profile


def _builder(replay: Replay, profile: AgentProfile) -> runner.AgentBuilder:
    def build(run: Run, capabilities: list[AbstractCapability[Any]]) -> ExecutableAgent[Any]:
        # A tool the profile names that this Host no longer has is left out: a call of it is then a divergence.
        registry = toolbox.registry()
        tools = [registry[name] for name in profile.enabled_tools or [] if name in registry]
        definition: AgentDefinition[Any] = AgentDefinition(
            name=profile.name,
            model=replay.model(),
            model_settings={"max_retries": run.policy_version.model_max_retries},
            instructions=profile.instructions or None,
            toolsets=[replay.wrap(FunctionToolset(tools))],
            capabilities=capabilities,
        )
        return definition.build()

    return build


def _new_replay(original: Execution, profile: AgentProfile) -> Run:
    """The replay's execution and its one queued run, on a new thread of the original's team."""
    with transaction.atomic():
        team = original.thread.team
        thread = create_thread(profile, title=f"Replay of #{original.pk}", team=team)
        version = current_policy_version(team)
        execution = Execution.objects.create(
            thread=thread,
            number=1,
            input=original.input,
            shown_input=original.shown_input,
            trigger=ExecutionTrigger.MANUAL,
            policy_version=version,
            replay_of=original,
        )
        # Not `new_run`: that sends the run to RQ, where a worker would answer it with the profile's real model.
        return Run.objects.create(
            execution=execution,
            number=1,
            reason=RunReason.INITIAL,
            tool_recovery=version.tool_recovery,
            policy_version=version,
            profile_snapshot=profile_snapshot(profile),
            start_checkpoint=thread.selected_checkpoint,
        )


def replay_execution(original: Execution, *, profile: str | None = None) -> ReplayOutcome:
    """Replay `original` with the current definition of its profile (or of `profile`, a name in its team)."""
    replay = Replay(recorded_messages(original))
    chosen = _profile(original, profile)
    run = _new_replay(original, chosen)
    runner.execute_run(run.pk, build=_builder(replay, chosen))
    execution = Execution.objects.get(pk=run.execution_id)
    divergence = replay.divergence
    if execution.status == ExecutionStatus.COMPLETED:
        divergence = replay.finish()
    elif divergence is None:
        divergence = Divergence(
            replay.steps, "run_ended", "the run to go on", f"it ended {execution.status}: {execution.failure_message}"
        )
    if divergence is not None:
        execution.replay_divergence = divergence.as_json()
        execution.save(update_fields=["replay_divergence"])
    return ReplayOutcome(original, execution, divergence, replay.steps)
