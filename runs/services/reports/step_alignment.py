"""Two runs lined up step by step, and the first step where they differ: pure, over step summaries.

A step is what the model or a tool did, as the timeline showed it (masked): a model's message, a tool call with
its arguments, a tool's result, a decision, the run's end. Ids and times always differ between runs, so they are
not compared. When one run went on from a checkpoint of the other (a fork, a recovery), the other run's steps up to
that checkpoint are its history too: they are lined up as shared, and the comparison starts after them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Literal

__all__ = ("AlignedRow", "Alignment", "Difference", "StepSummary", "align", "difference")

StepKind = Literal["input", "message", "reasoning", "tool_call", "tool_result", "decision", "error", "end"]
DifferenceKind = Literal["missing", "kind", "tool", "arguments", "text", "outcome"]

_KIND_WORDS: dict[str, str] = {
    "input": "an input",
    "message": "a message",
    "reasoning": "reasoning",
    "tool_call": "a tool call",
    "tool_result": "a tool result",
    "decision": "a decision",
    "error": "a failure",
    "end": "the run's end",
}
# Steps whose `name` is a tool's: a different one is a different tool; for the others it is an outcome.
_TOOL_KINDS = frozenset({"tool_call", "tool_result"})


@dataclass(frozen=True, slots=True)
class StepSummary:
    kind: StepKind
    name: str = ""  # the tool's name; a decision's verdict; an end's outcome; an error's code
    args: str = ""  # a tool call's (masked) arguments, as the model sent them
    text: str = ""  # a message's text, a result's content, an error's message
    # Where the step ends in its execution's timeline: for links and shared prefixes, never compared.
    position: int = field(default=0, compare=False)

    @property
    def label(self) -> str:
        return self.kind.replace("_", " ")


@dataclass(frozen=True, slots=True)
class Difference:
    kind: DifferenceKind
    detail: str


@dataclass(frozen=True, slots=True)
class AlignedRow:
    number: int  # 1-based
    a: StepSummary | None
    b: StepSummary | None
    # A step of one run that the other took over as its history (it went on from a checkpoint after it).
    shared: bool
    difference: Difference | None


@dataclass(frozen=True, slots=True)
class Alignment:
    rows: tuple[AlignedRow, ...]
    # The index in `rows` of the first row that differs; None when the runs do the same steps.
    first_divergence: int | None

    @property
    def equal(self) -> bool:
        return self.first_divergence is None

    @property
    def divergence(self) -> AlignedRow | None:
        return None if self.first_divergence is None else self.rows[self.first_divergence]


def _canonical(args: str) -> object:
    """Arguments as a value, so key order and spacing do not count; text that is no JSON stays text."""
    try:
        return json.loads(args) if args else {}
    except ValueError:
        return args


def _argument_keys(a: object, b: object) -> list[str]:
    """The top-level keys whose values differ, when both are objects."""
    if not isinstance(a, dict) or not isinstance(b, dict):
        return []
    return [key for key in [*a, *(key for key in b if key not in a)] if a.get(key) != b.get(key)]


def _first_difference(a: str, b: str) -> int:
    index = 0
    while index < len(a) and index < len(b) and a[index] == b[index]:
        index += 1
    return index


def difference(a: StepSummary | None, b: StepSummary | None) -> Difference | None:
    """What differs between two steps at the same place, or None when they did the same."""
    if a is None or b is None:
        if a is None and b is None:
            return None
        return Difference("missing", "only in run B" if a is None else "only in run A")
    if a.kind != b.kind:
        return Difference("kind", f"{_KIND_WORDS[a.kind]} in run A, {_KIND_WORDS[b.kind]} in run B")
    if a.name != b.name:
        if a.kind in _TOOL_KINDS:
            return Difference("tool", f"a different tool: {a.name} in run A, {b.name} in run B")
        return Difference("outcome", f"{a.name or 'none'} in run A, {b.name or 'none'} in run B")
    args_a, args_b = _canonical(a.args), _canonical(b.args)
    if args_a != args_b:
        keys = _argument_keys(args_a, args_b)
        return Difference("arguments", f"different arguments: {', '.join(keys)}" if keys else "different arguments")
    if a.text != b.text:
        if a.kind == "tool_result":
            return Difference("text", "a different result")
        return Difference("text", f"different text from character {_first_difference(a.text, b.text) + 1}")
    return None


def align(a: list[StepSummary], b: list[StepSummary], *, shared_a: int = 0, shared_b: int = 0) -> Alignment:
    """Line `a` and `b` up step by step.

    `shared_a` is how many of `a`'s first steps `b` took over (b went on from a's checkpoint after them), and
    `shared_b` the same the other way; at most one of them is more than 0. Those steps are lined up as shared,
    beside nothing, and the comparison starts after them.
    """
    if shared_a and shared_b:
        raise ValueError("only one of two runs can have gone on from the other's checkpoint")
    shared = shared_a or shared_b
    left: list[StepSummary | None] = [*([None] * shared_b), *a]
    right: list[StepSummary | None] = [*([None] * shared_a), *b]
    rows: list[AlignedRow] = []
    first: int | None = None
    for index in range(max(len(left), len(right))):
        step_a = left[index] if index < len(left) else None
        step_b = right[index] if index < len(right) else None
        is_shared = index < shared
        found = None if is_shared else difference(step_a, step_b)
        if found is not None and first is None:
            first = index
        rows.append(AlignedRow(number=index + 1, a=step_a, b=step_b, shared=is_shared, difference=found))
    return Alignment(rows=tuple(rows), first_divergence=first)
