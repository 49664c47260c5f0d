"""Shared fixtures: a real redis-server, daphne and RQ worker subprocesses, and Chromium through Playwright.

Every test that starts a process is marked `services` (tests/support/processes.py says how), and every module that
migrates the schema back and forth is marked `migrations` (tests/test_layout.py checks it), so `bin/test --fast`
runs the rest: the engine, the projection and the Host in this process.

Browser tests use Playwright's sync API, which keeps an event loop running in the main thread for the whole
session; they are therefore sorted last, and Django's async-safety guard is relaxed for the ORM calls they make.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.db.models.signals import post_save
from hypothesis import settings as hypothesis_settings
from hypothesis.configuration import set_hypothesis_home_dir

from harness_site.settings import HARNESS_VAR_DIR, channel_layer_config
from tests.support import template_db
from tests.support.agui_js.client import AguiClient
from tests.support.processes import PROCESS_FIXTURES, ProcessGuard
from tests.support.property_examples import FAST_PROFILE
from tests.support.services import CHROMIUM, CHROMIUM_ARGS, DaphneServer, RedisServer, RQWorker, service_env

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

# Hypothesis keeps its examples and caches in this run's var directory, not in the checkout.
set_hypothesis_home_dir(HARNESS_VAR_DIR / "hypothesis")


PROCESS_GUARD = ProcessGuard().install()
MD5_HASHER = "django.contrib.auth.hashers.MD5PasswordHasher"


def pytest_addoption(parser):
    parser.addoption(
        "--fast",
        action="store_true",
        help="the edit-test loop: leave out the tests marked `services` (they start processes) and `migrations`;"
        " cheap password hashes",
    )


def pytest_configure(config):
    config.pluginmanager.register(BrowserTestsLast(), "browser-tests-last")
    if config.getoption("fast"):
        expression = config.option.markexpr
        skipped = "not services and not migrations"
        config.option.markexpr = f"({expression}) and {skipped}" if expression else skipped
        hypothesis_settings.load_profile(FAST_PROFILE)


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by the marks added here
def pytest_collection_modifyitems(config, items):
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if PROCESS_FIXTURES & fixtures:
            item.add_marker(pytest.mark.services)
        if {"page", "browser", "browser_context"} & fixtures:
            item.add_marker(pytest.mark.browser)


class BrowserTestsLast:
    """Browser tests run last (see module docstring). The sort comes after pytest's own reordering of items by
    their wider-scoped fixtures, which would otherwise move a browser test before in-process runs: once Playwright's
    loop runs in the main thread, every `async_to_sync` there fails."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        items.sort(key=lambda item: item.get_closest_marker("browser") is not None)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    PROCESS_GUARD.refusing = None if item.get_closest_marker("services") else item.nodeid
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    # Teardown also ends the wider-scoped fixtures of earlier (marked) tests: not this test's own work.
    PROCESS_GUARD.refusing = None
    return (yield)


@pytest.fixture(scope="session", autouse=True)
def cheap_password_hashes(request) -> Iterator[None]:
    """With --fast, new passwords are hashed with MD5: Django's PBKDF2 costs half a second of CPU for each new user
    or login, over half of the fast lane. Not in the full run: daphne checks logins there with its own settings."""
    if not request.config.getoption("fast"):
        yield
        return
    from django.conf import settings
    from django.test import override_settings

    with override_settings(PASSWORD_HASHERS=[MD5_HASHER, *settings.PASSWORD_HASHERS]):
        yield


@pytest.fixture(scope="session", autouse=True)
def static_files_found_on_request(request) -> Iterator[None]:
    """With --fast, WhiteNoise looks a static file up when it is asked for, as under `DEBUG`, instead of listing and
    stat-ing every static file when each test client makes its first request: about 8 ms of CPU for each of some
    600 clients. The same files are served (tests/test_fast_lane.py)."""
    if not request.config.getoption("fast"):
        yield
        return
    from django.test import override_settings

    with override_settings(WHITENOISE_AUTOREFRESH=True):
        yield


def copies_a_template(config: pytest.Config) -> bool:
    """The fast lane on SQLite copies a migrated template database (tests/support/template_db.py)."""
    from django.db import connections

    return config.getoption("fast") and connections["default"].vendor == "sqlite"


def worker_database() -> Path:
    """This process's test database file (an xdist worker's has a suffix)."""
    from django.conf import settings

    return Path(settings.DATABASES["default"]["TEST"]["NAME"])


@pytest.fixture(scope="session")
def django_db_keepdb(request, django_db_keepdb) -> bool:
    """Keep the copy of the template: migrating it from nothing again is what the copy saves."""
    return django_db_keepdb or copies_a_template(request.config)


@pytest.fixture(scope="session")
def django_db_modify_db_settings(request, django_db_modify_db_settings) -> None:
    # After pytest-django's own, which gives each xdist worker its own database name.
    if copies_a_template(request.config):
        template_db.place(template_db.template_for(worker_database()), worker_database())


@pytest.fixture(scope="session")
def django_db_setup(request, django_db_setup) -> None:
    if copies_a_template(request.config):
        template_db.keep(worker_database(), template_db.template_for(worker_database()))


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer().start()
    yield server
    server.stop()


@dataclass(frozen=True)
class RedisDatabase:
    url: str


def _point_at(settings, url: str) -> None:
    settings.REDIS_URL = url
    settings.CHANNEL_LAYERS = {"default": channel_layer_config(url)}
    settings.RQ_QUEUES = {"default": {"URL": url, "DEFAULT_TIMEOUT": 600}}


@pytest.fixture
def redis_settings(settings, redis_server):
    """Point Channels and django-rq of this process at the test redis-server, and empty it afterwards.

    This is database 1: the session's live stack works on database 0 and shares the test database, so its worker
    would take a job this process enqueues (on commit) and means to run in process."""
    database = RedisDatabase(redis_server.url.rsplit("/", 1)[0] + "/1")
    _point_at(settings, database.url)
    yield database
    _forget_everything_but_workers(database.url)


def _forget_everything_but_workers(url: str) -> None:
    """Empty queues, jobs and channel groups between tests, but keep the registrations of the session's live
    workers: a worker registers once at start, and deleting its keys would make it invisible to /health/."""
    import redis

    client = redis.Redis.from_url(url)
    doomed = [key for key in client.scan_iter(count=1000) if not key.startswith((b"rq:workers", b"rq:worker:"))]
    for start in range(0, len(doomed), 500):
        client.delete(*doomed[start : start + 500])


@dataclass
class Stack:
    """daphne + RQ worker subprocesses that share the test database and the test redis-server."""

    redis: RedisServer
    env: dict[str, str]
    daphne: DaphneServer
    worker: RQWorker

    @property
    def base_url(self) -> str:
        return self.daphne.base_url

    @property
    def ws_url(self) -> str:
        return self.daphne.ws_url

    def restart_worker(self) -> RQWorker:
        self.worker.stop()
        self.worker = RQWorker(self.env).start()
        return self.worker

    def restart_daphne(self) -> DaphneServer:
        port = self.daphne.port
        self.daphne.stop()
        self.daphne = DaphneServer(self.env, port=port).start()
        return self.daphne


@pytest.fixture(scope="session")
def stack(django_db_setup, django_db_blocker, redis_server) -> Iterator[Stack]:
    """The whole app as separate processes. Tests using it need `transactional_db` so their rows are visible."""
    from django.conf import settings

    env = service_env(redis_url=redis_server.url, database_name=settings.DATABASES["default"]["NAME"])
    daphne = DaphneServer(env).start()
    worker = RQWorker(env).start()
    running = Stack(redis=redis_server, env=env, daphne=daphne, worker=worker)
    yield running
    running.worker.stop()
    running.daphne.stop()


@pytest.fixture
def live_stack(stack, transactional_db, redis_settings, settings) -> Iterator[Stack]:
    """The stack, with this process's Channels/RQ settings pointed at the same redis and committed DB rows."""
    _point_at(settings, stack.redis.url)
    yield stack
    _forget_everything_but_workers(stack.redis.url)


@pytest.fixture(autouse=True)
def default_membership(django_user_model) -> Iterator[None]:
    """Every user a test creates joins the team `default` as an operator (see `factories.join_default_team`)."""
    from tests.support.factories import join_default_team

    post_save.connect(join_default_team, sender=django_user_model, dispatch_uid="tests-default-membership")
    yield
    post_save.disconnect(sender=django_user_model, dispatch_uid="tests-default-membership")


@pytest.fixture(autouse=True)
def fresh_start_counts() -> Iterator[None]:
    """Each test starts with empty start-limit windows: users of earlier tests may have had the same pks."""
    from django.core.cache import cache

    cache.clear()
    yield


@pytest.fixture
def without_default_membership(default_membership, django_user_model) -> None:
    """Users created in this test have only the memberships the test gives them."""
    post_save.disconnect(sender=django_user_model, dispatch_uid="tests-default-membership")


@pytest.fixture
def operator_user(django_user_model):
    from tests.support.factories import create_decider

    return create_decider(django_user_model, "op", "op-password-1")


@pytest.fixture
def scenario_tools(settings):
    """The host's tool registry also holds the tools of tests/support/approval_scenarios.py (in this process)."""
    settings.HARNESS_TOOLSETS = [*settings.HARNESS_TOOLSETS, "tests.support.approval_scenarios.toolset"]


@pytest.fixture(scope="session")
def agui_client() -> AguiClient:
    """The official AG-UI client, run by node; a test that needs it is skipped when bin/setup has not installed it."""
    return AguiClient.required()


@pytest.fixture(scope="session")
def browser() -> Iterator:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield instance
        instance.close()


@pytest.fixture
def page(browser) -> Iterator:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    opened = context.new_page()
    opened.set_default_timeout(15_000)
    yield opened
    context.close()
