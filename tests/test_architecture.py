"""Architecture rules run with the test suite: the pure packages stay pure (import-linter), the code is linted."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def run(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)


def test_import_contracts_hold():
    result = run(str(BIN / "lint-imports"), "--no-cache")
    assert result.returncode == 0, result.stdout + result.stderr


def test_import_contract_catches_django_in_the_engine(tmp_path):
    """Guard the guard: a module in runs.harness importing django must make the contract fail."""
    offender = ROOT / "runs" / "harness" / "_contract_probe.py"
    offender.write_text("import django  # noqa: F401\n")
    try:
        result = run(str(BIN / "lint-imports"), "--no-cache")
    finally:
        offender.unlink()
    assert result.returncode != 0
    assert "runs.harness._contract_probe" in result.stdout


def test_ruff_lint_is_clean():
    result = run(str(BIN / "ruff"), "check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_is_clean():
    result = run(str(BIN / "ruff"), "format", "--check", ".")
    assert result.returncode == 0, result.stdout + result.stderr
