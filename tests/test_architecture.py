"""Architecture rules run with the test suite: the pure packages stay pure (import-linter), the code is linted, and the
pure packages' type annotations hold (mypy with the pydantic plugin, configured in pyproject.toml)."""

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def run(*argv: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True)


def test_import_contracts_hold():
    result = run(str(BIN / "lint-imports"), "--no-cache")
    assert result.returncode == 0, result.stdout + result.stderr


def test_import_contract_catches_django_in_the_engine(tmp_path):
    """Guard the guard: a module in runs.harness importing django must make the contract fail.

    The offender goes into a copy of the packages, never into the checkout, where parallel runs would see it;
    lint-imports reads the copy's configuration and finds the copy first on its path (its working directory).
    """
    for package in ("runs", "observers", "agui_api"):
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    (tmp_path / "runs" / "harness" / "_contract_probe.py").write_text("import django  # noqa: F401\n")
    result = run(str(BIN / "lint-imports"), "--no-cache", cwd=tmp_path)
    assert result.returncode != 0
    assert "runs.harness._contract_probe" in result.stdout


def test_ruff_lint_is_clean():
    result = run(str(BIN / "ruff"), "check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_is_clean():
    result = run(str(BIN / "ruff"), "format", "--check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_pure_packages_type_check(settings):
    assert (BIN / "mypy").exists(), "mypy is not installed: run bin/setup"
    # Its cache goes to this run's var directory: runs in parallel must not share one.
    result = run(str(BIN / "mypy"), "--cache-dir", str(settings.HARNESS_VAR_DIR / "mypy_cache"))
    assert result.returncode == 0, result.stdout + result.stderr
