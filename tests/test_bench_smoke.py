"""`bin/bench --quick` runs end to end and writes its JSON results and table (no timing is asserted)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CASE_KEYS = {
    "name",
    "size",
    "items",
    "subject",
    "baseline_name",
    "baseline",
    "slowdown",
    "relative_throughput",
    "target",
    "figure",
    "met",
}
STATS_KEYS = {"unit", "median", "min", "max", "q1", "q3", "repeats", "samples"}
MACHINE_KEYS = {"nproc", "memory_gib", "cpu_model", "python", "sqlite", "postgresql"}
EXPECTED = {
    "hosting-sqlite": {"engine", "host", "host cost per delta"},
    "journal-sqlite": {"write"},
    "observer-sqlite": {"observe", "resume"},
    "replay-sqlite": {"replay"},
    "live-sqlite": {"creation-to-receipt p50", "creation-to-receipt p99", "creation-to-receipt max"},
    "group_commit-sqlite": {"cpu"},
    "bundles-sqlite": {
        "export full",
        "export redacted",
        "import full",
        "import redacted",
        "bundle bytes full",
        "bundle bytes redacted",
    },
    "model_replay-sqlite": {"replay"},
    "retention-sqlite": {"rows deleted per second", "longest transaction", "live write p99 during a pass"},
    "webhooks-sqlite": {"burst delivered", "enqueue-to-receipt p50", "enqueue-to-receipt p99"},
}


@pytest.mark.services
def test_quick_bench_writes_results_and_table(tmp_path):
    completed = subprocess.run(
        [
            str(ROOT / "bin" / "bench"),
            "--quick",
            "--output",
            str(tmp_path),
            "--only",
            "hosting,observer,journal,replay,live,group_commit,bundles,model_replay,retention,webhooks",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]

    written = {path.stem: json.loads(path.read_text()) for path in tmp_path.glob("*-*.json")}
    assert set(written) == set(EXPECTED)
    assert set(json.loads((tmp_path / "run.json").read_text())) == {"total_seconds", "cpu"}
    for stem, cases in EXPECTED.items():
        result = written[stem]
        assert result["quick"] is True
        assert result["repeats"] >= 3
        assert set(result["machine"]) >= MACHINE_KEYS
        assert {case["name"] for case in result["cases"]} == cases
        for case in result["cases"]:
            assert set(case) >= CASE_KEYS
            assert set(case["subject"]) >= STATS_KEYS
            assert len(case["subject"]["samples"]) == result["repeats"]
            if case["baseline"] is not None:
                assert set(case["baseline"]) >= STATS_KEYS
                assert case["slowdown"] > 0
            if case["target"] is not None:
                assert isinstance(case["met"], bool)
    assert {growth["case"] for growth in written["observer-sqlite"]["growth"]} == {"observe", "resume"}

    table = (tmp_path / "BENCHMARKS.md").read_text()
    assert "## Machine" in table and "## Results" in table
    for stem in EXPECTED:
        assert f"| {stem.split('-')[0]} | sqlite |" in table
