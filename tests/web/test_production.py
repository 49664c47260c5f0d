"""`HARNESS_ENV=production`: HTTPS only, a strict CSP, a SECRET_KEY from the environment, no demo password.

Settings are read once per process, so each case runs Django in a subprocess with the production environment.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from runs.demo_operator import DEMO_PASSWORD, DEMO_USERNAME
from runs.models import AgentProfile
from runs.services.store import toolbox
from tests.support.services import ROOT, free_port

HEADERS_OF_ONE_REQUEST = """
import django; django.setup()
from django.test import Client
plain = Client().get("/login/")
secure = Client().get("/login/", secure=True)
print(plain.status_code, plain.get("Location"))
print(secure.status_code)
print(secure["Strict-Transport-Security"])
print(secure["Content-Security-Policy"])
print(secure.cookies["csrftoken"]["secure"])
"""


def production_env(tmp_path, **extra: str) -> dict[str, str]:
    # The test session relaxes async safety for its browser tests; a deployment never does.
    drop = ("SECRET_KEY", "DEBUG", "DATABASE_URL", "DJANGO_ALLOW_ASYNC_UNSAFE")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(
        HARNESS_ENV="production",
        SECRET_KEY=secrets.token_urlsafe(50),
        ALLOWED_HOSTS="harness.example,testserver",
        HARNESS_VAR_DIR=str(tmp_path),
        DJANGO_SETTINGS_MODULE="harness_site.settings",
    )
    env.update(extra)
    return {k: v for k, v in env.items() if v != ""}


def run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.services
def test_check_deploy_prints_nothing_to_fix_in_production(tmp_path):
    completed = run([sys.executable, "manage.py", "check", "--deploy"], production_env(tmp_path))
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == "System check identified no issues (0 silenced).\n"
    assert completed.stderr == ""


@pytest.mark.services
def test_check_deploy_warns_without_the_switch(tmp_path):
    completed = run([sys.executable, "manage.py", "check", "--deploy"], production_env(tmp_path, HARNESS_ENV="local"))
    assert "security.W008" in completed.stderr + completed.stdout


@pytest.mark.services
@pytest.mark.parametrize(
    ("change", "reason"),
    [({"SECRET_KEY": ""}, "needs SECRET_KEY"), ({"DEBUG": "1"}, "refuses DEBUG"), ({"HARNESS_ENV": "prod"}, "must be")],
)
def test_production_refuses_to_start_misconfigured(tmp_path, change, reason):
    completed = run([sys.executable, "manage.py", "check"], production_env(tmp_path, **change))
    assert completed.returncode != 0
    assert reason in completed.stderr


@pytest.mark.services
def test_production_answers_only_over_https_with_hsts_csp_and_secure_cookies(tmp_path, transactional_db, settings):
    env = production_env(tmp_path, DATABASE_URL=f"sqlite:///{settings.DATABASES['default']['NAME']}")
    completed = run([sys.executable, "-c", HEADERS_OF_ONE_REQUEST], env)
    assert completed.returncode == 0, completed.stderr[-3000:]
    redirect, status, hsts, csp, cookie_secure = completed.stdout.splitlines()
    assert redirect == "301 https://testserver/login/"
    assert status == "200"
    assert hsts == "max-age=31536000; includeSubDomains; preload"
    assert "script-src 'self'" in csp
    assert "default-src 'none'" in csp
    assert "unsafe-inline" not in csp
    assert cookie_secure == "True"


# What each process of bin/run starts with: bin/run's own check before supervisord, then the web, worker and
# sweeper processes. Each refuses by itself, so none of them starts and is restarted over and over.
PROCESSES = {
    "bin/run's check": ["manage.py", "check"],
    "web (daphne)": ["-c", "import harness_site.asgi"],
    "worker": ["manage.py", "rqworker", "default", "--burst"],
    "sweeper": ["manage.py", "harness_recover"],
}


@pytest.mark.services
def test_production_refuses_to_start_any_process_while_the_demo_password_works(tmp_path, transactional_db, settings):
    # Redis on a closed port: a process that got past the check would fail on something else.
    env = production_env(
        tmp_path,
        DATABASE_URL=f"sqlite:///{settings.DATABASES['default']['NAME']}",
        REDIS_URL=f"redis://127.0.0.1:{free_port()}/0",
    )
    operator = get_user_model().objects.create_user(DEMO_USERNAME, password=DEMO_PASSWORD)

    for name, argv in PROCESSES.items():
        refused = run([sys.executable, *argv], env)
        assert refused.returncode != 0, name
        assert "the account 'operator' still has the demo password" in refused.stderr, (name, refused.stderr[-2000:])
        assert "manage.py changepassword operator" in refused.stderr, name

    operator.set_password("a-real-password-42")
    operator.save()
    assert run([sys.executable, "manage.py", "check"], env).returncode == 0
    assert run([sys.executable, "-c", "import harness_site.asgi"], env).returncode == 0


@pytest.mark.django_db
def test_setup_creates_the_demo_operator_once_and_never_promotes_it_again(capsys):
    call_command("ensure_demo_operator")
    assert "Created the demo operator 'operator'" in capsys.readouterr().out
    operator = get_user_model().objects.get(username=DEMO_USERNAME)
    assert operator.is_superuser and operator.check_password(DEMO_PASSWORD)
    assert operator.has_perm("runs.decide_deferred")

    call_command("ensure_demo_operator")
    assert "exists with password 'operator'" in capsys.readouterr().out

    operator.is_superuser = operator.is_staff = False
    operator.set_password("changed-password-7")
    operator.save()
    call_command("ensure_demo_operator")
    assert "was changed (left as it is)" in capsys.readouterr().out
    operator.refresh_from_db()
    assert not operator.is_superuser and not operator.is_staff
    assert operator.check_password("changed-password-7")


@pytest.mark.django_db
def test_setup_creates_the_demo_profile_once_and_leaves_it_as_it_is(capsys):
    call_command("ensure_demo_profile")
    assert "Created the agent profile 'demo'" in capsys.readouterr().out
    profile = AgentProfile.objects.get(name="demo")
    assert profile.model == "demo" and profile.enabled_tools == toolbox.tool_names()

    profile.instructions = "Edited by an operator."
    profile.save()
    call_command("ensure_demo_profile")
    assert "exists (left as it is)" in capsys.readouterr().out
    assert AgentProfile.objects.get(name="demo").instructions == "Edited by an operator."


@pytest.mark.django_db
def test_production_setup_creates_no_demo_profile(settings, capsys):
    settings.PRODUCTION = True
    call_command("ensure_demo_profile")
    assert "no demo profile" in capsys.readouterr().out
    assert not AgentProfile.objects.exists()


@pytest.mark.django_db
def test_production_setup_creates_no_demo_operator(settings, capsys):
    settings.PRODUCTION = True
    call_command("ensure_demo_operator")
    assert "no demo operator" in capsys.readouterr().out
    assert not get_user_model().objects.filter(username=DEMO_USERNAME).exists()
