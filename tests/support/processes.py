"""Which tests start processes, and a guard that refuses a process to any other test.

A test that starts a process (a server, a worker, Chromium, PostgreSQL, node, a shell command or a child Python) is
marked `services`, and `bin/test --fast` leaves it out. The marks come from two places: tests/conftest.py marks
every test that needs one of PROCESS_FIXTURES, directly or through other fixtures; a test that starts a process
in its own body carries the mark itself. The guard finds the ones that do neither: Python reports every process
it starts to its audit hooks, and the hook refuses one while an unmarked test runs.
"""

from __future__ import annotations

import sys

# The fixtures that start a process; tests/conftest.py marks every test whose fixture closure holds one.
PROCESS_FIXTURES = frozenset(
    {
        "redis_server",  # tests/conftest.py; also behind redis_settings, stack, live_stack
        "stack",  # daphne and an RQ worker
        "browser",  # Chromium through Playwright; also behind page and operator_page
        "agui_client",  # the official AG-UI client, run by node
        "local_shell",  # tests/harness/test_shell_observation.py: commands in a local shell
        "postgres_url",  # tests/host/test_postgres.py: a temporary PostgreSQL cluster
        "fleet",  # tests/host/test_scale_out.py
        "supervised",  # tests/host/test_supervised.py
        "plugin_queue",  # tests/host/test_tool_plugins.py
        "traced_queue",  # tests/host/test_run_telemetry_live.py
        "worker_with_keys",  # tests/providers/test_openai_compatible_host.py
        "outage",  # tests/host/test_redis_outage.py, tests/web/test_redis_outage_browser.py
        "restartable",  # tests/web/test_sockets_after_redis_restart.py
        "recovered",  # tests/harness/test_recovery_crash.py: the crashing agent and its resume
    }
)

# The audit events of the calls that start a process (https://docs.python.org/3/library/audit_events.html).
PROCESS_EVENTS = frozenset({"subprocess.Popen", "os.system", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty"})


class UnmarkedProcessError(RuntimeError):
    pass


class ProcessGuard:
    """An audit hook that refuses to start a process while `refusing` names the running (unmarked) test."""

    def __init__(self) -> None:
        self.refusing: str | None = None

    def install(self) -> ProcessGuard:
        # An audit hook cannot be removed; it stays for the whole pytest process and checks `refusing` on each event.
        sys.addaudithook(self)
        return self

    def __call__(self, event: str, args: tuple[object, ...]) -> None:
        if self.refusing is not None and event in PROCESS_EVENTS:
            raise UnmarkedProcessError(
                f"{self.refusing} starts a process ({event}) but is not marked `services`: mark it, or name the "
                "fixture that starts it in PROCESS_FIXTURES (tests/support/processes.py)"
            )
