"""BENCHMARKS.md from the JSON results: machine, every figure with its baseline and ratio, growth, findings.

The findings (why a target is missed, with the profile that explains it) are written by hand in
`bench/findings.md`; the table itself is always regenerated from the latest JSON.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ("render",)

FINDINGS = Path(__file__).resolve().parent / "findings.md"
ORDER = ("journal", "observer", "replay", "live", "browser")
MACHINE_FIELDS = (
    ("nproc", "CPUs (nproc)"),
    ("memory_gib", "Memory (GiB)"),
    ("cpu_model", "CPU model"),
    ("python", "Python"),
    ("sqlite", "SQLite"),
    ("postgresql", "PostgreSQL"),
    ("platform", "Platform"),
    ("load_average_at_start", "Load average at start (1/5/15 min)"),
    ("commit", "Commit measured"),
)


def _load(directory: Path) -> list[dict[str, Any]]:
    results = [json.loads(path.read_text()) for path in sorted(directory.glob("*.json"))]
    return sorted(
        results, key=lambda r: (ORDER.index(r["benchmark"]) if r["benchmark"] in ORDER else 99, r["database"])
    )


def _figure(stats: dict[str, Any] | None) -> str:
    if stats is None:
        return "—"
    unit = stats["unit"]
    scale, shown = (1000.0, "ms") if unit == "s" else (1.0, unit)
    return f"{stats['median'] * scale:.1f} {shown} ({stats['min'] * scale:.1f}–{stats['max'] * scale:.1f})"


def _rate(stats: dict[str, Any] | None) -> str:
    if not stats or "items_per_s" not in stats:
        return "—"
    return f"{stats['items_per_s']:,.0f}"


def _ratio(case: dict[str, Any]) -> str:
    target = case["target"]
    if target and target["metric"] == "relative_throughput" and case["relative_throughput"]:
        return f"{case['relative_throughput']:.3f} of baseline items/s"
    if case["slowdown"]:
        return f"{case['slowdown']:.2f}x baseline time/item"
    return "—"


def _target(case: dict[str, Any]) -> str:
    target = case["target"]
    if not target:
        return "—"
    verdict = {True: "**met**", False: "**MISSED**", None: "n/a"}[case["met"]]
    return f"{target['description']}: {verdict}"


def render(directory: Path, *, total_seconds: float | None = None) -> str:
    results = _load(directory)
    lines = ["# Benchmarks", ""]
    if not results:
        return "\n".join([*lines, "No results yet: run `bin/bench`.", ""])
    first = results[0]
    quick = any(result["quick"] for result in results)
    lines += [
        "Produced by `bin/bench`"
        + (" --quick (1k items only: a smoke run, not figures to quote)" if quick else "")
        + f" on {first['started_at']}"
        + (f", {total_seconds:.0f} s in total." if total_seconds is not None else "."),
        "Every figure is the median of at least "
        f"{min(r['repeats'] for r in results)} repetitions, with min–max in brackets; baselines ran in the same "
        "process run, interleaved with their subject. Raw samples are in `bench/results/*.json`.",
        "",
        "**Noise warning:** these figures were taken while other work shared the 2 CPUs (see the load average "
        "below); absolute times are inflated and spreads are wide. Ratios against a baseline are more telling than "
        "absolute times, and the numbers will be re-taken on a quiet machine.",
        "",
        "## Machine",
        "",
        "| | |",
        "|---|---|",
    ]
    for key, label in MACHINE_FIELDS:
        value = first["machine"].get(key, "")
        lines.append(f"| {label} | {', '.join(map(str, value)) if isinstance(value, list) else value} |")
    lines += [
        "",
        "## Results",
        "",
        "| Benchmark | DB | Case | Size | Items | Subject median (min–max) | Subject items/s | Baseline | "
        "Baseline median (min–max) | Ratio | Target |",
        "|---|---|---|---|---:|---|---:|---|---|---|---|",
    ]
    for result in results:
        for case in result["cases"]:
            lines.append(
                f"| {result['benchmark']} | {result['database']} | {case['name']} | {case['size']} | "
                f"{case['items'] or '—'} | {_figure(case['subject'])} | {_rate(case['subject'])} | "
                f"{case['baseline_name'] or '—'} | {_figure(case['baseline'])} | {_ratio(case)} | {_target(case)} |"
            )
    growth_rows = [(result, growth) for result in results for growth in result.get("growth", [])]
    if growth_rows:
        lines += [
            "",
            "## Growth: cost per item by run length",
            "",
            "| Benchmark | DB | Case | µs/item by size | largest / smallest |",
            "|---|---|---|---|---:|",
        ]
        for result, growth in growth_rows:
            per_item = ", ".join(f"{size}: {value:,.1f}" for size, value in growth["us_per_item"].items())
            factor = growth["largest_over_smallest"]
            lines.append(
                f"| {result['benchmark']} | {result['database']} | {growth['case']} | {per_item} | "
                f"{'—' if factor is None else f'{factor:.2f}'} |"
            )
    notes = [(result, note) for result in results for note in result.get("notes", [])]
    if notes:
        lines += ["", "## How each benchmark measures", ""]
        lines += [f"- **{result['benchmark']}** ({result['database']}): {note}" for result, note in notes]
    if FINDINGS.exists():
        lines += ["", FINDINGS.read_text().rstrip()]
    return "\n".join(lines) + "\n"
