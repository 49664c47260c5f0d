"""Run-local shell observation (spec S85–S87): tools, references, offsets, release and state."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest
from pydantic_ai import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo

from runs.harness import (
    SHELL_MOUNT,
    SHELL_TOOL_NAMES,
    AgentDefinition,
    DynamicEnvironmentCapability,
    EnvironmentState,
    HarnessState,
    LocalShellEnvironment,
    RunCleanupError,
    RunError,
    RunShell,
    scripted_model,
)
from tests.support.scripted_shell import ScriptedCommand, ScriptedShell, calling, tool_results


def shell_agent(script):
    return AgentDefinition(model=scripted_model(script), capabilities=[DynamicEnvironmentCapability()]).build()


async def run_steps(steps, environment, *, previous_state=None):
    result = await shell_agent(calling(steps)).run(
        "use the shell", environment=environment, previous_state=previous_state
    )
    assert result.status == "completed", result.failure
    return result, tool_results(result.state.message_history)


@pytest.fixture
def local_shell(tmp_path) -> LocalShellEnvironment:
    """The local backend in the test's directory: its commands are processes of this machine."""
    return LocalShellEnvironment(tmp_path)


async def offered_tools(environment) -> set[str]:
    seen: set[str] = set()

    def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.update(tool.name for tool in info.function_tools)
        return ModelResponse(parts=[TextPart("done")])

    await shell_agent(script).run("which tools?", environment=environment)
    return seen


async def test_tools_follow_the_run_environment_and_its_actions(tmp_path):
    """S85: the capability composes tools from the mount's real actions; no environment, no shell tools."""
    for environment, expected in [
        (None, set()),
        (LocalShellEnvironment(tmp_path), {"shell_exec", "shell_info", "shell_wait", "shell_input", "shell_signal"}),
        (ScriptedShell(actions=frozenset({"exec", "wait"})), {"shell_exec", "shell_wait"}),
        (ScriptedShell(actions=frozenset({"list"})), {"shell_info"}),
    ]:
        assert await offered_tools(environment) & set(SHELL_TOOL_NAMES) == expected


async def test_exec_runs_a_command_and_pages_its_output(tmp_path, local_shell):
    """S85: shell execution in the run's root; the page says status, exit code and output."""
    (tmp_path / "note.txt").write_text("kept")
    result, (page,) = await run_steps([("shell_exec", {"command": "cat note.txt; echo oops >&2; exit 3"})], local_shell)
    assert page["ok"] is True
    assert page["status"] == {"state": "exited", "exit_code": 3}
    assert page["stdout"]["text"] == "kept"
    assert page["stderr"]["text"] == "oops\n"
    assert page["process_id"].startswith(f"{result.run_id}:shell-")


async def test_queries_do_not_reset_output(local_shell):
    """S85: reading takes explicit offsets and consumes nothing; inspecting reads nothing."""
    steps = [
        ("shell_exec", {"command": "printf abcdef", "page_bytes": 1024}),
        ("shell_wait", lambda r: {"process_id": r[0]["process_id"], "stdout_offset": 0, "stderr_offset": 0}),
        ("shell_info", lambda r: {"process_id": r[0]["process_id"]}),
        ("shell_wait", lambda r: {"process_id": r[0]["process_id"], "stdout_offset": 0, "stderr_offset": 0}),
        ("shell_wait", lambda r: {"process_id": r[0]["process_id"], "stdout_offset": 3, "stderr_offset": 0}),
    ]
    _, (started, first, info, again, tail) = await run_steps(steps, local_shell)
    assert started["stdout"]["text"] == first["stdout"]["text"] == again["stdout"]["text"] == "abcdef"
    assert first["stdout"]["next_offset"] == again["stdout"]["next_offset"] == 6
    assert set(info) == {"ok", "process_id", "command", "status"}
    assert tail["stdout"] == {"text": "def", "offset": 3, "next_offset": 6, "more": False, "retained": 6}


async def test_completion_does_not_claim_the_output_was_captured(local_shell):
    """S85: an exited command may still have output beyond the page, and its children may still write."""
    steps = [
        ("shell_exec", {"command": "head -c 3000 /dev/zero | tr '\\0' a", "page_bytes": 1024}),
        ("shell_wait", lambda r: {"process_id": r[0]["process_id"], "stdout_offset": 2048, "stderr_offset": 0}),
    ]
    _, (page, last) = await run_steps(steps, local_shell)
    assert page["status"]["state"] == "exited"
    assert page["stdout"]["next_offset"] == 1024
    assert page["stdout"]["more"] is True
    assert (last["stdout"]["next_offset"], last["stdout"]["more"]) == (3000, False)


async def test_a_page_never_cuts_a_character(local_shell):
    """Offsets are bytes; a page ends before a split UTF-8 character, which the next page starts with."""
    text = "é" * 1000
    steps = [
        ("shell_exec", {"command": f"printf '%s' '{'x' + text}'", "page_bytes": 1024}),
        (
            "shell_wait",
            lambda r: {
                "process_id": r[0]["process_id"],
                "stdout_offset": r[0]["stdout"]["next_offset"],
                "stderr_offset": 0,
            },
        ),
    ]
    _, (first, second) = await run_steps(steps, local_shell)
    assert first["stdout"]["next_offset"] == 1023
    assert first["stdout"]["text"] + second["stdout"]["text"] == "x" + text


async def test_stdin_and_signals_where_supported(local_shell):
    """S85: stdin and control tools act on the command; neither reads output."""
    steps = [
        ("shell_exec", {"command": "cat", "yield_time_seconds": 0}),
        ("shell_input", lambda r: {"process_id": r[0]["process_id"], "text": "hello\n", "close_stdin": True}),
        (
            "shell_wait",
            lambda r: {"process_id": r[0]["process_id"], "stdout_offset": 0, "stderr_offset": 0, "timeout_seconds": 30},
        ),
        ("shell_exec", {"command": "sleep 30", "yield_time_seconds": 0}),
        ("shell_signal", lambda r: {"process_id": r[3]["process_id"], "signal": "terminate"}),
        (
            "shell_wait",
            lambda r: {"process_id": r[3]["process_id"], "stdout_offset": 0, "stderr_offset": 0, "timeout_seconds": 30},
        ),
    ]
    _, (started, written, echoed, _, _, ended) = await run_steps(steps, local_shell)
    assert started["status"]["state"] == "running"
    assert set(written) == {"ok", "process_id", "command", "status"}
    assert (echoed["status"], echoed["stdout"]["text"]) == ({"state": "exited", "exit_code": 0}, "hello\n")
    assert ended["status"] == {"state": "exited", "exit_code": -15}


async def test_input_after_closing_stdin_is_refused(local_shell):
    steps = [
        ("shell_exec", {"command": "cat", "yield_time_seconds": 0}),
        ("shell_input", lambda r: {"process_id": r[0]["process_id"], "text": "", "close_stdin": True}),
        ("shell_input", lambda r: {"process_id": r[0]["process_id"], "text": "late"}),
    ]
    _, (_, closed, refused) = await run_steps(steps, local_shell)
    assert closed["ok"] is True
    assert (refused["ok"], refused["code"]) == (False, "shell_stdin_closed")


async def test_unsupported_actions_are_refused_not_run():
    shell = ScriptedShell(actions=frozenset({"exec", "inspect"}))
    _, (page, listing) = await run_steps([("shell_exec", {"command": "x"}), ("shell_info", {})], shell)
    assert page["ok"] is True
    assert listing == {"ok": False, "code": "shell_action_unsupported", "message": "this shell does not support 'list'"}


async def test_references_belong_to_one_run():
    """S85/S86: a new run assigns new references and refuses one read back from history."""
    first, (old,) = await run_steps([("shell_exec", {"command": "serve"})], ScriptedShell())
    later_shell = ScriptedShell()
    steps = [
        ("shell_exec", {"command": "serve"}),
        ("shell_wait", {"process_id": old["process_id"], "stdout_offset": 0, "stderr_offset": 0}),
        ("shell_info", {"process_id": old["process_id"]}),
    ]
    second, (new, waited, inspected) = await run_steps(steps, later_shell, previous_state=first.state)
    assert new["process_id"] != old["process_id"]
    assert new["process_id"].startswith(f"{second.run_id}:")
    for refused in (waited, inspected):
        assert refused["ok"] is False
        assert refused["code"] == "process_reference_foreign"


async def test_references_are_checked_by_run_and_number():
    shell = RunShell(ScriptedShell(), run_id="run-a")
    assert (await shell.start("x", yield_seconds=0, limit=1024)).process_id == "run-a:shell-1"
    for reference, code in [
        ("run-a:shell-2", "process_reference_unknown"),
        ("run-b:shell-1", "process_reference_foreign"),
    ]:
        with pytest.raises(RunError) as error:
            await shell.inspect(reference)
        assert error.value.code == code


async def test_a_restored_adapter_discovers_retained_commands_under_new_references():
    """S86: discovery finds what the backend retained; this run names it with a reference of its own."""
    retained = ScriptedCommand(key="native-7", command="long job", output={"stdout": b"so far", "stderr": b""})
    steps = [
        ("shell_info", {}),
        (
            "shell_wait",
            lambda r: {"process_id": r[0]["processes"][0]["process_id"], "stdout_offset": 0, "stderr_offset": 0},
        ),
    ]
    result, (listing, page) = await run_steps(steps, ScriptedShell(retained=[retained]))
    (found,) = listing["processes"]
    assert found["process_id"].startswith(f"{result.run_id}:shell-")
    assert found["command"] == "long job"
    assert page["stdout"]["text"] == "so far"


async def test_closing_a_run_releases_observations_without_stopping_commands():
    """S86: teardown releases every observation and closes the adapter; no command gets a signal."""
    shell = ScriptedShell(retained=[ScriptedCommand(key="native-9", command="kept")])
    await run_steps([("shell_exec", {"command": "a"}), ("shell_exec", {"command": "b"}), ("shell_info", {})], shell)
    commands = [*shell.started, *shell.retained]
    assert [command.released for command in commands] == [True, True, True]
    assert [command.signals for command in commands] == [[], [], []]
    assert shell.closed


async def test_a_local_command_outlives_its_run(tmp_path, local_shell):
    """S86 with the local backend: the run ends, the command keeps running, its observation is gone."""
    pid_file = tmp_path / "pid"
    stream = shell_agent(
        calling([("shell_exec", {"command": "echo $$ > pid; exec sleep 30", "yield_time_seconds": 0})])
    ).stream("start it", environment=local_shell)
    async with stream:
        async for _ in stream:
            pass
        shell = stream.context.shell
    pid = int(_wait_for_text(pid_file))
    try:
        assert stream.result.status == "completed"
        assert shell.references == ()
        assert _running(pid)
        # The run's output files are gone; the command writes on into them, unharmed.
        assert os.readlink(f"/proc/{pid}/fd/1").endswith("(deleted)")
    finally:
        os.kill(pid, 9)


async def test_a_command_started_while_the_run_was_cancelled_is_released_too():
    shell = ScriptedShell(start_gate=asyncio.Event())
    run_shell = RunShell(shell, run_id="run-a")
    starting = asyncio.create_task(run_shell.start("x", yield_seconds=0, limit=1024))
    await shell.starting.wait()
    starting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await starting
    shell.start_gate.set()
    assert await run_shell.close() == []
    assert shell.started[0].released


async def test_released_observations_refuse_further_use():
    shell = ScriptedShell()
    stream = shell_agent(calling([("shell_exec", {"command": "a"})])).stream("go", environment=shell)
    async with stream:
        async for _ in stream:
            pass
    with pytest.raises(RunError) as error:
        await stream.context.run_shell.inspect(f"{stream.run_id}:shell-1")
    assert error.value.code == "shell_released"


async def test_process_state_never_enters_capability_state():
    """S86/S84: references, buffers, watchers and cursors are not capability state; the adapter's own
    evidence is the run's environment state, under its mount."""
    shell = ScriptedShell()
    steps = [
        ("shell_exec", {"command": "a"}),
        ("shell_wait", lambda r: {"process_id": r[0]["process_id"], "stdout_offset": 0, "stderr_offset": 0}),
    ]
    stream = shell_agent(calling(steps)).stream("go", environment=shell)
    async with stream:
        async for _ in stream:
            pass
        exported = await stream.export_state()
    assert exported.agent_context_state.entries == {}
    assert exported.environment_states == {SHELL_MOUNT: shell.dump_state()}
    assert stream.result.state.environment_states == {SHELL_MOUNT: shell.dump_state()}


async def test_a_stateless_backend_and_earlier_evidence_export_nothing(local_shell):
    """Previous environment entries are the Host's evidence, never applied to or re-exported by a new run."""
    earlier = HarnessState.new(
        thread_id="thr_shell1",
        environment_states={"workspace": EnvironmentState(provider_key="old", state_version="1", state={"x": 1})},
    )
    result, _ = await run_steps([("shell_exec", {"command": "true"})], local_shell, previous_state=earlier)
    assert result.state.environment_states == {}


async def test_a_failing_adapter_close_is_a_cleanup_error_with_the_outcome():
    """S82 with an environment: the run's completed candidate survives as the error's outcome."""
    shell = ScriptedShell(close_error=OSError("target unreachable"))
    with pytest.raises(RunCleanupError) as error:
        await shell_agent(calling([("shell_exec", {"command": "a"})])).run("go", environment=shell)
    assert error.value.outcome.status == "completed"
    assert shell.started[0].released


def test_an_environment_that_is_not_a_shell_is_refused_before_the_run():
    with pytest.raises(RunError) as error:
        shell_agent(calling([])).stream("go", environment=object())
    assert error.value.code == "environment_invalid"


def _wait_for_text(path: Path) -> str:
    deadline = time.monotonic() + 30
    while not (path.exists() and path.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.01)
    return path.read_text().strip()


def _running(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] not in {"Z", "X"}
