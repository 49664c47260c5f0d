"""Real service processes for tests: redis-server, daphne and an RQ worker, each on free ports.

Fixtures in tests/conftest.py wrap these; they are plain classes so benchmarks can start them too.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Self, TypeVar

import redis

from harness_site.var_dir import prepare_var_dir

ROOT = Path(__file__).resolve().parents[2]

CHROMIUM = os.environ.get("CHROMIUM_BIN", "/usr/bin/chromium")
# Debian's Chromium as root, headless, on a machine without outside network: no sandbox, and none of the
# background connections it would otherwise retry.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


# As in deploy/supervisord.conf: in a burst of hundreds of subscriptions the application accepts some
# sockets only after daphne's default 5 s handshake limit, and daphne would drop them.
DAPHNE_OPTIONS = ["--websocket_connect_timeout", "60"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_until(predicate: Callable[[], object], *, timeout: float, what: str, interval: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what}")


def child_pids(pid: int) -> list[int]:
    """Direct children of `pid`, read from /proc (no extra dependency for one lookup)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            # The command name is in parentheses and may contain spaces: split after the last ')'.
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def redis_binary() -> str:
    found = os.environ.get("REDIS_SERVER_BIN") or shutil.which("redis-server")
    if not found:
        raise RuntimeError("redis-server is not installed; run bin/setup")
    return found


class RedisServer:
    def __init__(self, port: int | None = None) -> None:
        # A given port restarts a server where its clients expect it (a Redis restart, data lost).
        self.port = port or free_port()
        self.dir = tempfile.mkdtemp(prefix="harness-redis-")
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> RedisServer:
        self.process = subprocess.Popen(
            [
                redis_binary(),
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                self.dir,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = redis.Redis.from_url(self.url)

        def ping() -> bool:
            try:
                return bool(client.ping())
            except redis.ConnectionError:
                return False

        wait_until(ping, timeout=10, what="redis-server")
        return self

    def kill(self) -> None:
        """Stop it dead, as a crash would; `start()` brings it back, empty, on the same port."""
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)
        shutil.rmtree(self.dir, ignore_errors=True)


def service_env(*, redis_url: str, database_name: str | None) -> dict[str, str]:
    """Environment for a subprocess that must see the same Redis and (test) database as the test."""
    # Here, not at the top: bench imports this module before Django is set up, and the store's surface loads models.
    from runs.services.store import PROVIDERS

    # Subprocesses never reach a real model provider, whatever keys the machine running the tests has.
    provider_variables = {name for spec in PROVIDERS.values() for name in spec.key_variables}
    provider_variables |= {spec.base_url_variable for spec in PROVIDERS.values() if spec.base_url_variable}
    env = {
        **{name: value for name, value in os.environ.items() if name not in provider_variables},
        "REDIS_URL": redis_url,
        "PYTHONUNBUFFERED": "1",
        "DJANGO_SETTINGS_MODULE": "harness_site.settings",
        # Processes under test (and bench) start as much work as they are asked to; the limits are tested in-process.
        "HARNESS_STARTS_PER_MINUTE": "0",
        "HARNESS_TOKEN_STARTS_PER_MINUTE": "0",
    }
    if database_name:
        from django.conf import settings

        db = settings.DATABASES["default"]
        if db["ENGINE"] == "harness_site.private_sqlite":
            env["DATABASE_URL"] = f"sqlite:///{database_name}"
        else:
            user = db.get("USER") or ""
            password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
            env["DATABASE_URL"] = (
                f"postgres://{user}{password}@{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{database_name}"
            )
    return env


class ManagedProcess:
    """A subprocess in its own process group, with its output kept in a log file for failure reports."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str]) -> None:
        self.name = name
        self.argv = argv
        self.env = env
        self.log_path = Path(tempfile.mkstemp(prefix=f"harness-{name}-", suffix=".log")[1])
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> Self:
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            self.argv, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        return self

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def popen(self) -> subprocess.Popen[bytes]:
        """The started process; asking before `start()` is a mistake in the test."""
        assert self.process is not None, f"{self.name} was never started"
        return self.process

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Signal the process group and every direct child (RQ 3 moves each work-horse into a group of its own)."""
        if self.running:
            for child in child_pids(self.popen.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child, sig)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, sig)
            self.popen.wait(timeout=20)

    def stop(self) -> None:
        """SIGTERM; SIGKILL if that does not end it (a busy RQ worker waits for Redis before a warm stop)."""
        if self.running:
            try:
                self.kill(signal.SIGTERM)
            except subprocess.TimeoutExpired:
                self.kill()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


class DaphneServer(ManagedProcess):
    def __init__(self, env: dict[str, str], port: int | None = None) -> None:
        self.port = port or free_port()
        super().__init__(
            "daphne",
            [
                sys.executable,
                "-m",
                "daphne",
                *DAPHNE_OPTIONS,
                "-b",
                "127.0.0.1",
                "-p",
                str(self.port),
                "tests.support.live_asgi:application",
            ],
            env,
        )
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.ws_url = f"ws://127.0.0.1:{self.port}"

    def start(self) -> Self:
        super().start()

        def answers() -> bool:
            if not self.running:
                raise RuntimeError(f"daphne exited:\n{self.log()}")
            try:
                urllib.request.urlopen(f"{self.base_url}/login/", timeout=1)
                return True
            except OSError:
                return False

        wait_until(answers, timeout=30, what="daphne")
        return self


class RQWorker(ManagedProcess):
    def __init__(self, env: dict[str, str], *, with_scheduler: bool = False) -> None:
        # deploy/supervisord.conf's worker-ttl: an idle worker heartbeats (and restores a lost registration) every 5 s.
        argv = [sys.executable, "manage.py", "rqworker", "default", "--worker-ttl", "20"]
        if with_scheduler:
            argv.append("--with-scheduler")
        super().__init__("rqworker", argv, env)


Process = TypeVar("Process", bound=ManagedProcess)


@contextlib.contextmanager
def running(process: Process) -> Iterator[Process]:
    process.start()
    try:
        yield process
    finally:
        process.stop()


class Supervised:
    """`deploy/supervisord.conf` (what `bin/run` starts) in a directory of its own, on free ports."""

    def __init__(self, env: dict[str, str], *, workers: int = 1, web: int = 1) -> None:
        self.var_dir = Path(tempfile.mkdtemp(prefix="harness-supervised-"))
        prepare_var_dir(self.var_dir)
        (self.var_dir / "redis").mkdir()
        (self.var_dir / "log").mkdir()
        self.port, self.redis_port = free_port(), free_port()
        self.redis_url = f"redis://127.0.0.1:{self.redis_port}/0"
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.env = {
            **env,
            "HARNESS_VAR_DIR": str(self.var_dir),
            "HARNESS_PORT": str(self.port),
            "REDIS_PORT": str(self.redis_port),
            "REDIS_URL": self.redis_url,
            "HARNESS_WORKERS": str(workers),
            "HARNESS_WEB": str(web),
            "PATH": f"{Path(sys.executable).parent}:{env.get('PATH', '')}",
        }
        self.supervisord = ManagedProcess(
            "supervisord", [str(Path(sys.executable).parent / "supervisord"), "-c", "deploy/supervisord.conf"], self.env
        )

    def start(self) -> Supervised:
        self.supervisord.start()
        wait_until(lambda: self.socket_path.exists(), timeout=20, what="supervisord's control socket")
        return self

    @property
    def socket_path(self) -> Path:
        return self.var_dir / "supervisor.sock"

    def processes(self) -> dict[str, dict[str, Any]]:
        """supervisord's view of every process, by name (`worker-0`, `web-1`, `redis`, ...)."""
        from xmlrpc.client import ServerProxy

        from supervisor.xmlrpc import SupervisorTransport

        transport = SupervisorTransport(None, None, serverurl=f"unix://{self.socket_path}")
        proxy = ServerProxy("http://127.0.0.1", transport=transport)
        infos = proxy.supervisor.getAllProcessInfo()
        assert isinstance(infos, list), infos
        return {info["name"]: info for info in infos}

    def stop(self) -> None:
        """What Ctrl-C on `bin/run` does: supervisord stops every process, then itself."""
        if self.supervisord.running:
            self.supervisord.popen.send_signal(signal.SIGINT)
            self.supervisord.popen.wait(timeout=90)
        shutil.rmtree(self.var_dir, ignore_errors=True)
