"""Architecture rules run with the test suite: the import contracts hold (import-linter: the pure packages stay pure,
the layers and the services' layers, migrations without the project's code), the code is linted, and the type
annotations hold (mypy with the pydantic and django-stubs plugins over every package and the tests, configured in
pyproject.toml)."""

import ast
import io
import re
import shutil
import subprocess
import sys
import tokenize
import tomllib
from collections import defaultdict
from pathlib import Path

import ag_ui.core
import pydantic_ai
import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent

# import-linter, ruff and mypy run as processes; `bin/test --fast` leaves the whole module to the full run.
pytestmark = pytest.mark.services


def run(*argv: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True)


def test_import_contracts_hold():
    result = run(str(BIN / "lint-imports"), "--no-cache")
    assert result.returncode == 0, result.stdout + result.stderr


PROBES = [
    # (module planted into a copy of the packages, its source, the contract it must break)
    ("runs/harness/_contract_probe.py", "import django", "pure: no Django, Channels or RQ"),
    ("runs/services/contract_probe.py", "from runs.harness._stream import HarnessRunStream", "No deep imports"),
    ("runs/services/contract_probe.py", "from observers.agui._observer import HarnessAguiObserver", "No deep imports"),
    ("runs/services/contract_probe.py", "import runs.views", "Layers:"),
    ("observers/agui/_contract_probe.py", "import runs.services", "Layers:"),
    ("runs/services/contract_probe.py", "import observers.consumers", "One-way between the apps"),
    ("runs/services/timeline/contract_probe.py", "import agui_api.streams", "Layers:"),
    ("runs/services/store/contract_probe.py", "import runs.services.timeline", "Services in layers"),
    ("runs/services/timeline/contract_probe.py", "import runs.services.lifecycle", "Services in layers"),
    ("runs/services/reports/contract_probe.py", "from runs.services.lifecycle import approvals", "Services in layers"),
    ("runs/services/worker/contract_probe.py", "import runs.services.recovery", "Services in layers"),
    ("runs/services/contract_probe.py", "", "Services in layers"),
    ("runs/services/contract_probe.py", "import alerts.delivery", "Runs announce, alerts listen"),
    ("runs/migrations/_contract_probe.py", "import runs.services", "Migrations run frozen copies"),
    ("runs/migrations/_contract_probe.py", "from runs.models import Run", "Migrations run frozen copies"),
]


@pytest.mark.parametrize(("path", "source", "contract"), PROBES, ids=[probe[2] + " " + probe[1] for probe in PROBES])
def test_each_import_contract_catches_its_offender(tmp_path, path, source, contract):
    """Guard the guards: one offending import must break the contract that forbids it.

    The offender goes into a copy of the packages, never into the checkout, where parallel runs would see it;
    lint-imports reads the copy's configuration and finds the copy first on its path (its working directory).
    """
    for package in ("runs", "observers", "agui_api", "alerts"):
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    (tmp_path / path).write_text(source + "  # noqa: F401\n")
    result = run(str(BIN / "lint-imports"), "--no-cache", cwd=tmp_path)
    assert result.returncode != 0
    assert contract_status(result.stdout, contract) == "BROKEN", result.stdout
    assert path.removesuffix(".py").replace("/", ".") in result.stdout


def contract_status(report: str, contract: str) -> str:
    """KEPT or BROKEN, as lint-imports' summary says of the contract whose name starts with `contract`."""
    after = " ".join(report.split()).split(contract, 1)[1]
    kept, broken = after.find("KEPT"), after.find("BROKEN")
    return "BROKEN" if broken != -1 and (kept == -1 or broken < kept) else "KEPT"


def test_ruff_lint_is_clean():
    result = run(str(BIN / "ruff"), "check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_is_clean():
    result = run(str(BIN / "ruff"), "format", "--check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_project_type_checks(settings):
    assert (BIN / "mypy").exists(), "mypy is not installed: run bin/setup"
    # Its cache goes to this run's var directory: runs in parallel must not share one.
    result = run(str(BIN / "mypy"), "--cache-dir", str(settings.HARNESS_VAR_DIR / "mypy_cache"))
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_covers_every_package_and_the_tests():
    files = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]["files"]
    assert sorted(files) == sorted(SOURCES)


# Django finds a management command by this class name in its module; nothing else may share a type's name.
REQUIRED_NAMES = {"Command"}
SOURCES = ("runs", "observers", "agui_api", "alerts", "harness_site", "bench", "tests")


def _declares_a_type(node: ast.stmt) -> str | None:
    """The name of a class, type alias or type variable a module-level statement declares."""
    if isinstance(node, ast.ClassDef):
        return node.name
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return node.target.id if isinstance(node.annotation, ast.Name) and node.annotation.id == "TypeAlias" else None
    if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
        return None
    name, value = node.targets[0].id, node.value
    is_alias = isinstance(value, ast.Subscript) or (isinstance(value, ast.BinOp) and isinstance(value.op, ast.BitOr))
    is_variable = isinstance(value, ast.Call) and getattr(value.func, "id", None) in ("TypeVar", "NewType")
    return name if (is_alias or is_variable) and name[:1].isupper() and not name.isupper() else None


def test_no_two_types_share_a_name():
    """A name means one type: across the project, and apart from pydantic-ai's and AG-UI's own types."""
    declared: dict[str, list[str]] = defaultdict(list)
    for source in SOURCES:
        for path in sorted((ROOT / source).rglob("*.py")):
            if "migrations" in path.parts or "node_modules" in path.parts:
                continue
            for node in ast.parse(path.read_text()).body:
                if (name := _declares_a_type(node)) and name not in REQUIRED_NAMES:
                    declared[name].append(str(path.relative_to(ROOT)))
    libraries = {name: "pydantic_ai" for name in dir(pydantic_ai)} | {name: "ag_ui.core" for name in dir(ag_ui.core)}
    twice = {name: places for name, places in declared.items() if len(places) > 1}
    shadowing = {name: (places, libraries[name]) for name, places in declared.items() if name in libraries}
    assert not twice, twice
    assert not shadowing, shadowing


_IGNORE = re.compile(r"#\s*type:\s*ignore(?P<codes>\[[a-z, -]+\])?(?P<after>.*)")


def unexplained_ignores(source: str) -> list[int]:
    """The lines of `source` whose `type: ignore` names no error code or gives no reason (see below)."""
    lines = source.splitlines()
    explained: dict[int, bool] = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        match = _IGNORE.search(token.string) if token.type == tokenize.COMMENT else None
        if match is None:
            continue
        line = token.start[0]
        said_here = re.fullmatch(r"\s*#\s*\S.*", match["after"]) is not None
        said_above = line > 1 and lines[line - 2].lstrip().startswith("#")
        explained[line] = bool(match["codes"]) and (said_here or said_above or explained.get(line - 1, False))
    return [line for line, ok in explained.items() if not ok]


def test_every_type_ignore_names_its_code_and_a_reason():
    """Each `# type: ignore[code]` says why the checker is wrong there: a comment after it on its line
    (`# type: ignore[code]  # why`), or a comment line just above it. A run of ignores on consecutive lines shares
    the reason of its first. A bare `# type: ignore`, without a code, never passes."""
    found = {}
    for source in SOURCES:
        for path in sorted((ROOT / source).rglob("*.py")):
            if "node_modules" not in path.parts and (lines := unexplained_ignores(path.read_text())):
                found[str(path.relative_to(ROOT))] = lines
    assert not found, found


@pytest.mark.parametrize(
    ("source", "unexplained"),
    [
        ("x = f()  # type: ignore[misc]  # the stubs miss it\n", []),
        ("# the stubs miss it\nx = f()  # type: ignore[misc]\ny = f()  # type: ignore[misc]\n", []),
        ("x = f()  # type: ignore[misc]\n", [1]),
        ("x = f()  # type: ignore  # no code\n", [1]),
        ("x = 1\ny = f()  # type: ignore[misc]\n", [2]),
        ("# why\nx = 1\ny = f()  # type: ignore[misc]\nz = f()  # type: ignore[misc]\n", [3, 4]),
        ('x = "# type: ignore[misc]"\n', []),
    ],
)
def test_the_ignore_rule_catches_its_offenders(source, unexplained):
    assert unexplained_ignores(source) == unexplained
