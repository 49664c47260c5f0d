"""Child process of the crash test: a scripted agent with one retryable and one unmarked side-effecting tool.

`python -m tests.support.crash_agent crash DIR`: streams a run whose model calls both tools; at the first
tool-call event (the boundary before tool execution) it exports the state to DIR/state.json; the tools record
their start in DIR/<tool>.log and then block, so the parent can SIGKILL this process while they run.

`python -m tests.support.crash_agent resume DIR MODE...`: in a fresh process, for each MODE loads
DIR/MODE/state.json, continues it with `tool_recovery=MODE` (tools now finish at once, recording their start
in DIR/MODE/<tool>.log) and writes the result summary to DIR/MODE/result.json. One process serves every
mode because each resume only reads its own copy of the killed run's files.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from pydantic import TypeAdapter
from pydantic_ai import FunctionToolCallEvent, ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo

from runs.harness import (
    AgentDefinition,
    ExecutableAgent,
    HarnessEvent,
    HarnessState,
    ToolRecoveryMode,
    is_unknown_result,
    recovery_retryable,
    scripted_model,
)


def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if any(isinstance(part, ToolReturnPart) for part in messages[-1].parts):
        return ModelResponse(parts=[TextPart("finished")])
    return ModelResponse(
        parts=[
            ToolCallPart("lookup", {"record": "r1"}, tool_call_id="call-lookup"),
            ToolCallPart("charge", {"amount": 5}, tool_call_id="call-charge"),
        ]
    )


def executable(directory: Path, *, block: bool) -> ExecutableAgent[str]:
    def record_start(name: str) -> None:
        with (directory / f"{name}.log").open("a") as log:
            log.write(f"start pid={os.getpid()}\n")
            log.flush()
            os.fsync(log.fileno())

    async def side_effect(name: str) -> str:
        record_start(name)
        if block:
            await asyncio.Event().wait()
        return f"{name} done"

    async def lookup(record: str) -> str:
        return await side_effect("lookup")

    async def charge(amount: int) -> str:
        return await side_effect("charge")

    return AgentDefinition(model=scripted_model(script), tools=[recovery_retryable(lookup), charge]).build()


async def crash(directory: Path) -> None:
    async with executable(directory, block=True).stream("pay the invoice") as stream:
        async for item in stream:
            if isinstance(item, HarnessEvent) and isinstance(item.event, FunctionToolCallEvent):
                state = await stream.export_state()
                staging = directory / "state.json.tmp"
                staging.write_text(state.model_dump_json())
                staging.replace(directory / "state.json")


async def resume(directory: Path, mode: ToolRecoveryMode) -> None:
    directory = directory / mode
    state = HarnessState.model_validate_json((directory / "state.json").read_text())
    result = await executable(directory, block=False).run(previous_state=state, tool_recovery=mode)
    assert result.state is not None, result.failure
    results = {
        part.tool_call_id: "unknown" if is_unknown_result(part) else part.content
        for message in result.state.message_history
        for part in getattr(message, "parts", ())
        if isinstance(part, ToolReturnPart)
    }
    summary = {"status": result.status, "output": result.output, "results": results}
    (directory / "result.json").write_text(json.dumps(summary))


if __name__ == "__main__":
    phase, directory = sys.argv[1], Path(sys.argv[2])
    if phase == "crash":
        asyncio.run(crash(directory))
    else:
        for mode in sys.argv[3:]:
            asyncio.run(resume(directory, TypeAdapter(ToolRecoveryMode).validate_python(mode)))
