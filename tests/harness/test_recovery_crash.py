"""Crash recovery across processes: SIGKILL while side-effecting tools run, resume with each `tool_recovery`.

The child exports state at the boundary before tool execution; the parent kills it once both tools have
recorded their start, then continues the exported state in a new process. Under "declared" only the
retryable `lookup` runs again; the unmarked `charge` gets the unknown result. One crash and one resuming
process serve all three modes: each mode continues its own copy of the killed run's files.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DEADLINE_SECONDS = 60


def child(*args: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.crash_agent", *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def starts(directory: Path, tool: str) -> int:
    log = directory / f"{tool}.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


def crash_while_tools_run(directory: Path) -> None:
    process = child("crash", str(directory))
    deadline = time.monotonic() + DEADLINE_SECONDS
    try:
        # Killed only once the boundary state is on disk and both side effects have started.
        while not ((directory / "state.json").exists() and starts(directory, "lookup") and starts(directory, "charge")):
            if process.poll() is not None:
                assert process.stderr is not None
                raise AssertionError(f"the child ended early: {process.stderr.read().decode()}")
            if time.monotonic() > deadline:
                raise AssertionError("the child never started its tools")
            time.sleep(0.02)
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
    assert process.returncode == -signal.SIGKILL


MODES = ("declared", "never", "always")


@pytest.fixture(scope="module")
def recovered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The killed run's files, continued once per mode in one new process (DIR/<mode>/)."""
    directory = tmp_path_factory.mktemp("crash")
    crash_while_tools_run(directory)
    for mode in MODES:
        shutil.copytree(directory, directory / mode, ignore=shutil.ignore_patterns(*MODES))
    process = child("resume", str(directory), *MODES)
    _, stderr = process.communicate(timeout=DEADLINE_SECONDS)
    assert process.returncode == 0, stderr.decode()
    return directory


def test_the_killed_run_exported_its_calls_before_the_tools_ran(recovered):
    exported = json.loads((recovered / "state.json").read_text())
    assert [part["part_kind"] for part in exported["message_history"][-1]["parts"]] == ["tool-call", "tool-call"]
    assert (starts(recovered, "lookup"), starts(recovered, "charge")) == (1, 1)


@pytest.mark.parametrize(
    ("mode", "lookup_runs", "charge_runs"), [("declared", 2, 1), ("never", 1, 1), ("always", 2, 2)]
)
def test_resume_after_sigkill_follows_the_recovery_mode(recovered, mode, lookup_runs, charge_runs):
    directory = recovered / mode
    summary = json.loads((directory / "result.json").read_text())

    assert (starts(directory, "lookup"), starts(directory, "charge")) == (lookup_runs, charge_runs)
    assert summary["status"] == "completed" and summary["output"] == "finished"
    expected = {
        "call-lookup": "lookup done" if lookup_runs == 2 else "unknown",
        "call-charge": "charge done" if charge_runs == 2 else "unknown",
    }
    assert summary["results"] == expected
