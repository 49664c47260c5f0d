"""How every benchmark measures: repeated timings, their median and spread, targets and JSON results.

A measurement is a callable that performs one repetition and returns the seconds it took (so each repetition
can prepare its own fresh data outside the timed part). Subject and baseline are always measured in the same
process run, interleaved repetition by repetition, so background load hits both alike.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

__all__ = (
    "RESULTS_DIR",
    "Comparison",
    "Report",
    "Stats",
    "Target",
    "measure_interleaved",
    "measure_pair",
    "percentile",
    "repeat",
    "stopwatch",
)

RESULTS_DIR = Path(__file__).resolve().parent / "results"
Timed = Callable[[], float]


@dataclass(frozen=True)
class Stats:
    """One figure per repetition (seconds unless a unit says otherwise): median, min/max, IQR and the samples."""

    samples: tuple[float, ...]
    median: float
    minimum: float
    maximum: float
    q1: float
    q3: float

    @classmethod
    def of(cls, samples: list[float]) -> Stats:
        ordered = sorted(samples)
        if len(ordered) >= 2:
            q1, _, q3 = statistics.quantiles(ordered, n=4, method="inclusive")
        else:
            q1 = q3 = ordered[0]
        return cls(tuple(samples), statistics.median(ordered), ordered[0], ordered[-1], q1, q3)

    def rate(self, items: int) -> float:
        """Items per second at the median."""
        return items / self.median if self.median > 0 else float("inf")

    def as_json(self, items: int | None = None, unit: str = "s") -> dict[str, Any]:
        data: dict[str, Any] = {
            "unit": unit,
            "median": self.median,
            "min": self.minimum,
            "max": self.maximum,
            "q1": self.q1,
            "q3": self.q3,
            "repeats": len(self.samples),
            "samples": list(self.samples),
        }
        if items and unit == "s":
            data["items_per_s"] = self.rate(items)
            data["us_per_item"] = self.median / items * 1e6
        return data


@dataclass(frozen=True)
class Target:
    """What a figure must satisfy: `slowdown <= 3`, `relative_throughput >= 0.5`, or the subject's `median < 50`."""

    metric: str
    op: Literal["<=", "<", ">=", ">"]
    value: float
    description: str

    def met_by(self, figure: float) -> bool:
        return {
            "<=": figure <= self.value,
            "<": figure < self.value,
            ">=": figure >= self.value,
            ">": figure > self.value,
        }[self.op]


@dataclass
class Comparison:
    """One case: a subject timed against its baseline over the same items, and the target on their ratio.

    `slowdown` is subject time / baseline time per item; `relative_throughput` is its inverse (the subject's
    items/s as a fraction of the baseline's). `baseline_items` is set when the baseline can only take a subset
    of the items (pydantic-ai's adapter takes native events only).
    """

    name: str
    size: str
    items: int
    subject: Stats
    baseline: Stats | None
    baseline_name: str
    target: Target | None
    extra: dict[str, Any] = field(default_factory=dict)
    baseline_items: int | None = None
    unit: str = "s"

    @property
    def slowdown(self) -> float | None:
        """Subject cost per item over baseline cost per item (the same thing when both did the same items)."""
        if self.baseline is None or self.baseline.median <= 0:
            return None
        baseline_items = self.baseline_items or self.items
        return (self.subject.median / self.items) / (self.baseline.median / baseline_items)

    def figure(self) -> float | None:
        if self.target is None:
            return None
        if self.target.metric == "median":
            return self.subject.median
        if self.target.metric == "slowdown":
            return self.slowdown
        if self.target.metric == "relative_throughput":
            slowdown = self.slowdown
            return None if slowdown is None else 1 / slowdown
        return self.extra.get(self.target.metric)

    def as_json(self) -> dict[str, Any]:
        figure = self.figure()
        slowdown = self.slowdown
        return {
            "name": self.name,
            "size": self.size,
            "items": self.items,
            "subject": self.subject.as_json(self.items, self.unit),
            "baseline_name": self.baseline_name,
            "baseline": None
            if self.baseline is None
            else self.baseline.as_json(self.baseline_items or self.items, self.unit),
            "slowdown": slowdown,
            "relative_throughput": None if not slowdown else 1 / slowdown,
            "target": None if self.target is None else asdict(self.target),
            "figure": figure,
            "met": None if self.target is None or figure is None else self.target.met_by(figure),
            **self.extra,
        }


@dataclass
class Report:
    """The JSON file of one benchmark run: `<results>/<benchmark>-<database>.json`."""

    benchmark: str
    database: str
    quick: bool
    repeats: int
    cases: list[Comparison] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.time)

    def add(self, comparison: Comparison) -> Comparison:
        self.cases.append(comparison)
        return comparison

    def growth(self, name: str) -> dict[str, Any]:
        """Median cost per item of case `name` at every size, and the largest/smallest size ratio."""
        cases = sorted((c for c in self.cases if c.name == name), key=lambda c: c.items)
        per_item = {c.size: c.subject.median / c.items * 1e6 for c in cases if c.items}
        factor = None
        if len(per_item) >= 2:
            factor = (cases[-1].subject.median / cases[-1].items) / (cases[0].subject.median / cases[0].items)
        return {"case": name, "us_per_item": per_item, "largest_over_smallest": factor}

    def write(self, directory: Path, machine: dict[str, Any], *, growth_of: tuple[str, ...] = ()) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        data = {
            "benchmark": self.benchmark,
            "database": self.database,
            "quick": self.quick,
            "repeats": self.repeats,
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started)),
            "duration_s": time.time() - self.started,
            "machine": machine,
            "cases": [case.as_json() for case in self.cases],
            "growth": [self.growth(name) for name in growth_of],
            "notes": self.notes,
        }
        path = directory / f"{self.benchmark}-{self.database}.json"
        path.write_text(json.dumps(data, indent=2) + "\n")
        return path


def percentile(values: list[float], fraction: float) -> float:
    """The sample at `fraction` of the way through the sorted values (nearest rank): p99 is `percentile(v, 0.99)`."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


@contextmanager
def stopwatch() -> Iterator[Callable[[], float]]:
    """`with stopwatch() as elapsed: ...` then `elapsed()` gives the seconds the block took."""
    start = time.perf_counter()
    end: list[float] = []
    yield lambda: (end[0] if end else time.perf_counter()) - start
    end.append(time.perf_counter())


def repeat(timed: Timed, repeats: int, *, warmup: int = 1) -> Stats:
    for _ in range(warmup):
        timed()
    return Stats.of([timed() for _ in range(repeats)])


def measure_pair(subject: Timed, baseline: Timed, repeats: int, *, warmup: int = 1) -> tuple[Stats, Stats]:
    """Time subject and baseline alternately (after a warm-up of each), so drifting load affects both."""
    subject_stats, baseline_stats = measure_interleaved((subject, baseline), repeats, warmup=warmup)
    return subject_stats, baseline_stats


def measure_interleaved(timed: tuple[Timed, ...], repeats: int, *, warmup: int = 1) -> tuple[Stats, ...]:
    """Time several measurements in turn, repetition by repetition (after a warm-up of each)."""
    for _ in range(warmup):
        for one in timed:
            one()
    samples: list[list[float]] = [[] for _ in timed]
    for _ in range(repeats):
        for one, taken in zip(timed, samples, strict=True):
            taken.append(one())
    return tuple(Stats.of(taken) for taken in samples)
