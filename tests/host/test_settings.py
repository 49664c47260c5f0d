"""Settings: every variable declared and documented, bad values refused by the `harness` check, imports write nothing.

Settings are read once per process, so the cases about the environment run Django in a subprocess.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness_site import settings as settings_module
from harness_site.environment import Environment
from runs.checks import check_settings
from tests.support.services import ROOT

HOST_PACKAGES = ("runs", "observers", "agui_api", "alerts", "harness_site")


def run_django(argv: list[str], tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in ("SECRET_KEY", "DATABASE_URL")}
    environ.update(HARNESS_VAR_DIR=str(tmp_path / "var"), DJANGO_SETTINGS_MODULE="harness_site.settings", **env)
    return subprocess.run([sys.executable, *argv], cwd=ROOT, env=environ, capture_output=True, text=True, timeout=120)


@pytest.mark.services
def test_setting_django_up_writes_nothing(tmp_path):
    completed = run_django(["-c", "import django; django.setup()"], tmp_path, SECRET_KEY="k" * 50)
    assert completed.returncode == 0, completed.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.services
def test_without_a_secret_key_nothing_starts_and_bin_setup_is_named(tmp_path):
    completed = run_django(["manage.py", "check"], tmp_path)
    assert completed.returncode != 0
    assert "No secret key: set SECRET_KEY, or run bin/setup" in completed.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.services
def test_the_check_lists_every_bad_environment_value_at_once(tmp_path):
    completed = run_django(
        ["manage.py", "check"],
        tmp_path,
        SECRET_KEY="k" * 50,
        DEBUG="maybe",
        HARNESS_BEHIND_TLS_PROXY="2",
        HARNESS_HEALTH_QUEUE_LIMIT="lots",
        HARNESS_SOCKET_REFRESH_SECONDS="0",
        HARNESS_PORT="70000",
    )
    assert completed.returncode != 0
    assert "DEBUG='maybe' in the environment: it must be 1 or 0" in completed.stderr
    assert "HARNESS_BEHIND_TLS_PROXY='2' in the environment: it must be 1 or 0" in completed.stderr
    assert "HARNESS_HEALTH_QUEUE_LIMIT='lots' in the environment: it must be a whole number." in completed.stderr
    assert "HARNESS_SOCKET_REFRESH_SECONDS = 0.0: it must be a number of seconds above 0." in completed.stderr
    assert "HARNESS_PORT = 70000: it must be a whole number from 1 to 65535." in completed.stderr


@pytest.mark.services
def test_daphne_refuses_to_load_the_application_with_a_bad_value(tmp_path):
    completed = run_django(["-c", "import harness_site.asgi"], tmp_path, SECRET_KEY="k" * 50, DEBUG="maybe")
    assert completed.returncode != 0
    assert "DEBUG='maybe' in the environment" in completed.stderr


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("1", True), ("TRUE", True), (" yes ", True), ("on", True), ("0", False), ("off", False), ("", False)],
)
def test_a_flag_reads_the_usual_spellings(raw, expected):
    environment = Environment({"X": raw})
    assert environment.flag("X", default=not expected) is expected
    assert environment.problems == []


@pytest.mark.parametrize(
    ("read", "raw"),
    [
        (lambda env: env.flag("X", default=False), "maybe"),
        (lambda env: env.integer("X", 7), "7.5"),
        (lambda env: env.number("X", 7.0), "soon"),
        (lambda env: env.choice("X", "a", ("a", "b")), "c"),
    ],
)
def test_a_value_that_does_not_parse_is_a_problem_and_never_a_guess(read, raw):
    environment = Environment({"X": raw})
    assert read(environment) == read(Environment({}))
    [problem] = environment.problems
    assert problem.startswith(f"X={raw!r} in the environment: it must be ")


def test_a_list_is_stripped_of_spaces_and_empty_items():
    environment = Environment({"HOSTS": " a.example, b.example ,, ", "EMPTY": ""})
    assert environment.items("HOSTS", "x") == ["a.example", "b.example"]
    assert environment.items("EMPTY", "x") == []
    assert environment.items("UNSET", "c.example,d.example") == ["c.example", "d.example"]
    assert environment.names == ["HOSTS", "EMPTY", "UNSET"]


LISTS_OF_ONE_PROCESS = """
import json, django
django.setup()
from django.conf import settings
from django.test import RequestFactory
print(json.dumps([settings.ALLOWED_HOSTS, settings.CSRF_TRUSTED_ORIGINS, settings.HARNESS_TOOLSETS]))
print(RequestFactory().get("/", HTTP_HOST="b.example").get_host())
"""


@pytest.mark.services
def test_lists_from_the_environment_take_spaces_and_a_trailing_comma(tmp_path):
    completed = run_django(
        ["-c", LISTS_OF_ONE_PROCESS],
        tmp_path,
        SECRET_KEY="k" * 50,
        ALLOWED_HOSTS="a.example, b.example,",
        CSRF_TRUSTED_ORIGINS=" https://a.example , https://b.example",
        HARNESS_TOOLSETS="runs.harness.demo.toolset, ",
    )
    assert completed.returncode == 0, completed.stderr
    lists, host = completed.stdout.splitlines()
    assert json.loads(lists) == [
        ["a.example", "b.example"],
        ["https://a.example", "https://b.example"],
        ["runs.harness.demo.toolset"],
    ]
    # Django compares the Host header with the list as it is: a host with a leading space would never match.
    assert host == "b.example"


def test_the_default_settings_pass_the_check():
    assert check_settings() == []


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("HARNESS_LOGIN_FAILURE_LIMIT", 0),
        ("HARNESS_LOGIN_FAILURE_LIMIT", 2.5),
        ("HARNESS_SOCKET_SESSION_CHECK_SECONDS", float("nan")),
        ("HARNESS_SOCKET_REFRESH_SECONDS", float("inf")),
        ("HARNESS_RECOVERY_BACKOFF_SECONDS", -1),
        ("HARNESS_HEALTH_QUEUE_LIMIT", True),
        ("HARNESS_BEHIND_TLS_PROXY", "no"),
        ("HARNESS_TRUSTED_PROXIES", ["10.0.1.5", "proxy.internal"]),
        ("HARNESS_TRUSTED_PROXIES", []),
        ("HARNESS_WORKERS", 0),
        ("HARNESS_WEBHOOK_ATTEMPTS", 0),
        ("HARNESS_WEBHOOK_TIMEOUT_SECONDS", 0),
        ("HARNESS_WEBHOOK_EXPIRING_MINUTES", 0),
    ],
)
def test_the_check_refuses_a_setting_out_of_range(settings, name, value):
    setattr(settings, name, value)
    [error] = check_settings()
    assert error.id == "runs.E002"
    assert error.msg.startswith(f"{name} = {value!r}: it must be ")


def test_no_backoff_is_a_valid_setting(settings):
    settings.HARNESS_RECOVERY_BACKOFF_SECONDS = 0
    assert check_settings() == []


def test_every_setting_the_host_reads_is_declared():
    read = set()
    for package in HOST_PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            text = path.read_text()
            read |= set(re.findall(r"settings\.([A-Z][A-Z0-9_]+)", text))
            # A default at the point of use would hide a setting that is declared nowhere.
            assert not re.search(r"getattr\(settings, \"\w+\",", text), path
    harness_names = {name for name in read if name.startswith(("HARNESS_", "AGUI_"))}
    assert harness_names
    assert harness_names <= set(vars(settings_module))


def test_every_environment_variable_is_in_the_configuration_table():
    page = (ROOT / "docs" / "configuration.md").read_text()
    table = next(block for block in page.split("\n\n") if block.startswith("| variable"))
    documented = {name for row in table.splitlines() for name in re.findall(r"`([A-Z][A-Z0-9_]+)`", row.split("|")[1])}
    run_variables = set(re.findall(r"\b(HARNESS_[A-Z_]+|REDIS_PORT)\b", (ROOT / "bin/run").read_text()))
    assert set(settings_module.HARNESS_ENVIRONMENT_NAMES) | run_variables <= documented
