"""BENCHMARKS.md from the JSON results of one run: machine, every figure with its baseline and ratio, growth.

The findings (why a target is missed, with the profile that explains it) are written by hand in
`bench/findings.md`, which the table links to; the table itself is always regenerated from the run's JSON.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ("render",)

# bin/bench's whole run on a quiet 2-CPU machine takes about 20 minutes.
BUDGET_SECONDS = 25 * 60

ORDER = (
    "hosting",
    "journal",
    "observer",
    "replay",
    "live",
    "viewers",
    "browser",
    "concurrency",
    "group_commit",
    "execution_list",
    "bundles",
    "model_replay",
    "retention",
    "webhooks",
)
FLAT_LIMIT = 1.3
BYTES_LIMIT = 2.0
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
    results = [json.loads(path.read_text()) for path in sorted(directory.glob("*-*.json"))]
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
        unit = case["subject"]["unit"]
        return f"{case['slowdown']:.2f}x baseline {'time' if unit == 's' else unit}/item"
    return "—"


def _count(value: int | None) -> str:
    return "—" if value is None else f"{value:,}"


def _flat(factor: float | None) -> str:
    if factor is None:
        return "—"
    return "yes" if factor <= FLAT_LIMIT else "**NO**"


def _summary(results: list[dict[str, Any]]) -> list[str]:
    met = [(r, c) for r in results for c in r["cases"] if c["met"] is True]
    missed = [(r, c) for r in results for c in r["cases"] if c["met"] is False]
    lines = [f"**Target checks** (one per case and size): {len(met)} met, {len(missed)} missed."]
    if missed:
        named = sorted({f"{r['benchmark']} {c['name']} ({r['database']})" for r, c in missed})
        lines[0] += " Missed: " + "; ".join(named) + "."
    return lines


def _target(case: dict[str, Any]) -> str:
    target = case["target"]
    if not target:
        return "—"
    verdict = {True: "**met**", False: "**MISSED**", None: "n/a"}[case["met"]]
    return f"{target['description']}: {verdict}"


def render(directory: Path) -> str:
    results = _load(directory)
    run_file = directory / "run.json"
    run = json.loads(run_file.read_text()) if run_file.exists() else {}
    lines = ["# Benchmarks", ""]
    if not results:
        return "\n".join([*lines, "No results yet: run `bin/bench`.", ""])
    first = results[0]
    quick = any(result["quick"] for result in results)
    lines += [
        "Produced by `bin/bench`"
        + (" --quick (1k items only: a smoke run, not figures to quote)" if quick else "")
        + f" on {first['started_at']}"
        + (
            f": {run['total_seconds']:.0f} s wall clock in total"
            + (" (over the 25-minute budget: a loaded machine?)" if run["total_seconds"] > BUDGET_SECONDS else "")
            + f", {run['cpu']:.0f} s of CPU time (all its processes; the machine has 2 CPUs)."
            if run
            else "."
        ),
        "Every figure is the median of at least "
        f"{min(r['repeats'] for r in results)} repetitions, with min–max in brackets; baselines ran in the same "
        "process run, interleaved with their subject. Raw samples are in `bench/results/*.json`.",
        "",
        *_summary(results),
        "",
        "**Noise:** the machine is a shared 2-CPU virtual machine; the load average at the start is recorded "
        "below. Ratios against a baseline measured in the same run are more telling than absolute times.",
        "",
        "## Machine",
        "",
        "| | |",
        "|---|---|",
    ]
    commits: dict[str, list[str]] = {}
    for result in results:
        commits.setdefault(result["machine"].get("commit", "unknown"), []).append(result["benchmark"])
    for key, label in MACHINE_FIELDS:
        value = first["machine"].get(key, "")
        if key == "commit" and len(commits) > 1:
            # Results left from separate runs: say which figure comes from which commit rather than name one.
            value = "; ".join(f"{commit} ({', '.join(sorted(set(names)))})" for commit, names in commits.items())
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
            f"Flat means the largest size costs at most {FLAT_LIMIT}x per item what the smallest does.",
            "",
            "| Benchmark | DB | Case | µs/item by size | largest / smallest | flat? |",
            "|---|---|---|---|---:|---|",
        ]
        for result, growth in growth_rows:
            per_item = ", ".join(f"{size}: {value:,.1f}" for size, value in growth["us_per_item"].items())
            factor = growth["largest_over_smallest"]
            lines.append(
                f"| {result['benchmark']} | {result['database']} | {growth['case']} | {per_item} | "
                f"{'—' if factor is None else f'{factor:.2f}'} | {_flat(factor)} |"
            )
    stored = [(r, c) for r in results for c in r["cases"] if c.get("checkpoint_bytes") and c.get("journal_bytes")]
    if stored:
        lines += [
            "",
            "## Stored bytes: checkpoints against the journal",
            "",
            f"Target: a run's checkpoints take at most {BYTES_LIMIT}x the bytes of its journal.",
            "",
            "| Benchmark | DB | Case | Size | Tool rounds | Checkpoints | Checkpoint bytes | Journal bytes | Ratio | "
            "Whole states before | Target |",
            "|---|---|---|---|---:|---:|---:|---:|---:|---:|---|",
        ]
        for result, case in stored:
            ratio = case["checkpoint_bytes"] / case["journal_bytes"]
            lines.append(
                f"| {result['benchmark']} | {result['database']} | {case['name']} | {case['size']} | "
                f"{case.get('tool_rounds', '—')} | {case.get('checkpoints', '—')} | {case['checkpoint_bytes']:,} | "
                f"{case['journal_bytes']:,} | {ratio:.3f} | {_count(case.get('whole_state_bytes_before'))} | "
                f"{'**met**' if ratio <= BYTES_LIMIT else '**MISSED**'} |"
            )
    notes = [(result, note) for result in results for note in result.get("notes", [])]
    if notes:
        lines += ["", "## How each benchmark measures", ""]
        lines += [f"- **{result['benchmark']}** ({result['database']}): {note}" for result, note in notes]
    lines += ["", "## Findings", "", "Why a target is missed, from profiles: [bench/findings.md](bench/findings.md)."]
    return "\n".join(lines) + "\n"
