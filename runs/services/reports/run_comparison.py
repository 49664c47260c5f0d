"""Two runs of any executions compared: their steps lined up (`step_alignment`) and the first divergence, beside
what each produced and spent (output, tokens, cost, active and wall time, from `costs` and `durations`).

Steps are read from the timeline, which holds masked events only; the journal's real values are never read, and
neither is `Run.output` (the output shown is the masked result of the run's RUN_FINISHED event).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.utils import timezone

from observers.agui import INPUT_PREFIX
from runs.models import Checkpoint, CheckpointKind, Execution, Run, TimelineOrigin

from ..timeline import DECISION_EVENT_NAME, format_duration, read_side
from . import costs, durations
from .step_alignment import Alignment, StepKind, StepSummary, align

__all__ = ("RunComparison", "Side", "Suggestion", "compare_runs", "output_of", "steps_of", "suggestions")


@dataclass
class _Draft:
    kind: StepKind
    name: str = ""
    args: list[str] = field(default_factory=list)
    text: list[str] = field(default_factory=list)
    position: int = 0

    def step(self) -> StepSummary:
        return StepSummary(self.kind, self.name, "".join(self.args), "".join(self.text), self.position)


def _get(value: Any, key: str, default: Any = None) -> Any:
    """`value[key]` when `value` is an object holding it: an event of an unexpected shape is no reason to fail."""
    return value.get(key, default) if isinstance(value, dict) else default


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


class _StepReader:
    """Folds a run's own top-level events into steps, in the order each step began."""

    def __init__(self) -> None:
        self.drafts: list[_Draft] = []
        self.open: dict[tuple[str, str], _Draft] = {}
        self.tool_names: dict[str, str] = {}

    def _add(self, draft: _Draft) -> _Draft:
        self.drafts.append(draft)
        return draft

    def _keyed(self, kind: StepKind, key: str, name: str = "") -> _Draft:
        draft = self.open.get((kind, key))
        if draft is None:
            draft = self.open[(kind, key)] = self._add(_Draft(kind, name))
        return draft

    def feed(self, position: int, origin: str, event: dict[str, Any]) -> None:
        kind = event.get("type")
        draft: _Draft | None = None
        if kind in ("TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END"):
            draft = self._keyed("message", event.get("messageId", ""))
            draft.text.append(event.get("delta", ""))
        elif kind in ("REASONING_MESSAGE_START", "REASONING_MESSAGE_CONTENT", "REASONING_MESSAGE_END"):
            draft = self._keyed("reasoning", event.get("messageId", ""))
            draft.text.append(event.get("delta", ""))
        elif kind in ("TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END"):
            call_id = event.get("toolCallId", "")
            if "toolCallName" in event:
                self.tool_names[call_id] = event["toolCallName"]
            draft = self._keyed("tool_call", call_id, self.tool_names.get(call_id, ""))
            draft.args.append(event.get("delta", ""))
        elif kind == "TOOL_CALL_RESULT":
            name = self.tool_names.get(event.get("toolCallId", ""), "")
            draft = self._add(_Draft("tool_result", name, text=[_text(event.get("content", ""))]))
        elif kind == "RUN_ERROR":
            draft = self._add(_Draft("error", event.get("code") or "", text=[event.get("message", "")]))
        elif kind == "RUN_FINISHED" and origin == TimelineOrigin.RUN:
            draft = self._add(_Draft("end", _get(event.get("outcome"), "type", "success")))
        elif kind == "CUSTOM":
            self._custom(position, event)
        if draft is not None:
            draft.position = position

    def _custom(self, position: int, event: dict[str, Any]) -> None:
        name, value = event.get("name", ""), event.get("value")
        if name == DECISION_EVENT_NAME:
            for call in _get(value, "calls", []):
                edits = [{key: edit.get(key) for key in ("path", "change", "after")} for edit in call.get("edits", [])]
                outcome = f"{call.get('tool_name', '')} {call.get('verdict', '')}"
                args = json.dumps(edits, sort_keys=True) if edits else ""
                self._add(_Draft("decision", outcome, [args], [call.get("message", "")], position))
        elif name.startswith(INPUT_PREFIX):
            content = _get(_get(value, "event"), "content", value)
            self._add(_Draft("input", name.removeprefix(INPUT_PREFIX), text=[_text(content)], position=position))

    def steps(self) -> list[StepSummary]:
        return [draft.step() for draft in self.drafts]


def _own_events(run: Run) -> Any:
    # The run's own top-level items (an inline subagent's are its tool's business), as stored, masked.
    return run.timeline.filter(subagent_run_id="").order_by("position").values_list("position", "origin", "event")


def steps_of(run: Run) -> list[StepSummary]:
    reader = _StepReader()
    for position, origin, event in _own_events(run).iterator():
        reader.feed(position, origin, event)
    return reader.steps()


def output_of(run: Run) -> str | None:
    """The masked result of the run's RUN_FINISHED event, as text; None when it finished with none."""
    finished = run.timeline.filter(subagent_run_id="", event_type="RUN_FINISHED", origin=TimelineOrigin.RUN)
    event = finished.order_by("-position").values_list("event", flat=True).first()
    if not event or "result" not in event:
        return None
    return _text(event["result"])


def _went_on_from(later: Run) -> Checkpoint | None:
    """The checkpoint of another run that `later` continued: its start (a resume, a recovery), or for a fork's
    first run the checkpoint its thread was forked from."""
    start = later.start_checkpoint
    if start is None:
        return None
    if start.kind == CheckpointKind.FORK:
        return later.execution.thread.forked_from
    return start if start.run_id is not None else None


def _shared(earlier: Run, steps: list[StepSummary], later: Run) -> int:
    """How many of `earlier`'s first steps `later` took over as its history."""
    origin = _went_on_from(later)
    if earlier.pk == later.pk or origin is None or origin.run_id != earlier.pk or origin.journal_index is None:
        return 0
    end = read_side.prefix_end(earlier.pk, origin.journal_index)
    return 0 if end is None else sum(1 for step in steps if step.position <= end)


@dataclass(frozen=True)
class Side:
    """One compared run and what it produced and spent."""

    run: Run
    output: str | None
    usage: costs.Usage
    active: timedelta | None  # this run's active time (None: it never started)
    wall: timedelta  # its execution's wall time

    @property
    def active_text(self) -> str:
        return "not started" if self.active is None else format_duration(self.active)

    @property
    def wall_text(self) -> str:
        return format_duration(self.wall)


def _side(run: Run) -> Side:
    now = timezone.now()
    times = durations.execution_times(run.execution)
    span = next((span for span in times.spans if span.run.pk == run.pk), None)
    return Side(
        run=run,
        output=output_of(run),
        usage=costs.usage_of(Run.objects.filter(pk=run.pk)),
        active=span.active(now) if span else None,
        wall=times.wall(now),
    )


def _signed_count(difference: int) -> str:
    return f"{difference:+d}" if difference else "same"


def _signed_duration(a: timedelta | None, b: timedelta | None) -> str:
    if a is None or b is None:
        return "unknown"
    difference = b - a
    if abs(difference) < timedelta(milliseconds=50):
        return "same"
    return f"{'+' if difference > timedelta() else '−'}{format_duration(abs(difference))}"


def _signed_cost(a: Decimal | None, b: Decimal | None) -> str:
    if a is None or b is None:
        return "unknown"
    return "same" if a == b else f"{b - a:+.4f}"


@dataclass(frozen=True)
class RunComparison:
    a: Side
    b: Side
    alignment: Alignment

    @property
    def same_output(self) -> bool:
        return self.a.output == self.b.output

    def differences(self) -> dict[str, str]:
        """Run B against run A, as the summary shows it ("same", a signed difference or "unknown")."""
        a, b = self.a, self.b
        return {
            "input_tokens": _signed_count(b.usage.input_tokens - a.usage.input_tokens),
            "output_tokens": _signed_count(b.usage.output_tokens - a.usage.output_tokens),
            "requests": _signed_count(b.usage.requests - a.usage.requests),
            "cost": _signed_cost(a.usage.cost, b.usage.cost),
            "active": _signed_duration(a.active, b.active),
            "wall": _signed_duration(a.wall, b.wall),
        }


def compare_runs(a: Run, b: Run) -> RunComparison:
    """`a` and `b` (any two runs, the same one twice included) lined up, with what each produced and spent."""
    steps_a, steps_b = steps_of(a), steps_of(b)
    alignment = align(steps_a, steps_b, shared_a=_shared(a, steps_a, b), shared_b=_shared(b, steps_b, a))
    return RunComparison(a=_side(a), b=_side(b), alignment=alignment)


@dataclass(frozen=True)
class Suggestion:
    """A comparison an execution's page offers: `a` the original's run, `b` the fork's or the replay's."""

    label: str
    a: int
    b: int


def _first_run(execution_pk: int) -> int | None:
    first: int | None = (
        Run.objects.filter(execution_id=execution_pk).order_by("number").values_list("pk", flat=True).first()
    )
    return first


def suggestions(execution: Execution, runs: list[Run]) -> list[Suggestion]:
    """What the page of `execution` (whose runs are `runs`) offers to compare with: the run its fork went on from,
    the original it replayed, and its own replays; each with this execution's first run."""
    if not runs:
        return []
    first = runs[0]
    found: list[Suggestion] = []
    forked = first.start_checkpoint is not None and first.start_checkpoint.kind == CheckpointKind.FORK
    if forked and (origin := _went_on_from(first)) is not None and origin.run_id is not None:
        found.append(Suggestion("the run it was forked from", origin.run_id, first.pk))
    if execution.replay_of_id is not None and (original := _first_run(execution.replay_of_id)) is not None:
        found.append(Suggestion("the original it replayed", original, first.pk))
    for replay_pk in execution.replays.order_by("pk").values_list("pk", flat=True):
        if (replayed := _first_run(replay_pk)) is not None:
            found.append(Suggestion(f"its replay #{replay_pk}", first.pk, replayed))
    return found
