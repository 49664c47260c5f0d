"""The tests' own rules: what they share lives in tests/support/, no test module imports another, and a test that
starts a process is marked `services`."""

from __future__ import annotations

import ast
import functools
import subprocess
from pathlib import Path

import pytest

from tests.support.processes import UnmarkedProcessError

TESTS = Path(__file__).resolve().parent


def python_files() -> list[Path]:
    return [path for path in TESTS.rglob("*.py") if "node_modules" not in path.parts]


def is_test_or_conftest(path: Path) -> bool:
    return path.name.startswith("test_") or path.name == "conftest.py"


@functools.cache
def imported_modules(path: Path) -> frozenset[str]:
    """Every module `path` imports, relative imports resolved against its package (found once: walking every
    test module's tree is most of these checks' cost)."""
    package = path.relative_to(TESTS.parent).with_suffix("").parts[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package[: len(package) - node.level + 1]) if node.level else ""
            module = ".".join(part for part in (base, node.module or "") if part)
            found.add(module)
            # `from tests.web import test_pages` imports a module too.
            found |= {f"{module}.{alias.name}" for alias in node.names}
    return frozenset(found)


def test_support_code_is_in_tests_support():
    strays = [
        str(path.relative_to(TESTS))
        for path in python_files()
        if not is_test_or_conftest(path) and path.name != "__init__.py" and "support" not in path.parts
    ]
    assert strays == [], "move shared test code into tests/support/"


def test_no_test_module_or_conftest_is_imported():
    offenders = {
        f"{path.relative_to(TESTS)} imports {module}"
        for path in python_files()
        for module in imported_modules(path)
        if module.startswith("tests.") and module.rsplit(".", 1)[-1].startswith(("test_", "conftest"))
    }
    assert offenders == set(), "shared helpers belong in tests/support/"


def marks_at_module_level(path: Path) -> set[str]:
    """The marks of `pytestmark = pytest.mark.x` or `[pytest.mark.x, ...]` at the top of a module."""
    marks = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "pytestmark" for t in node.targets):
            values = node.value.elts if isinstance(node.value, ast.List) else [node.value]
            marks |= {ast.unparse(value).removeprefix("pytest.mark.").split("(")[0] for value in values}
    return marks


def test_a_module_that_migrates_the_schema_is_marked_migrations():
    """`bin/test --fast` leaves these out: going back and forth through the migrations takes seconds a test."""
    unmarked = [
        str(path.relative_to(TESTS))
        for path in python_files()
        if path.name.startswith("test_")
        and "django.db.migrations.executor" in imported_modules(path)
        and "migrations" not in marks_at_module_level(path)
    ]
    assert unmarked == []


def test_a_test_not_marked_services_cannot_start_a_process():
    with pytest.raises(UnmarkedProcessError, match="is not marked `services`"):
        subprocess.run(["true"], check=True)
