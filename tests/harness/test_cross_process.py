"""A state saved by one process continues the same Thread in another (issue 3 acceptance)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pydantic_ai import ModelResponse, TextPart

from runs.harness import AgentDefinition, HarnessRunResult, HarnessState, scripted_model

CONTINUE = textwrap.dedent(
    """
    import asyncio, json, sys
    from pathlib import Path
    from pydantic_ai import ModelResponse, TextPart
    from runs.harness import AgentDefinition, HarnessState
    from runs.harness import scripted_model

    def script(messages, info):
        prompts = [p.content for m in messages for p in m.parts if p.part_kind == 'user-prompt']
        return ModelResponse(parts=[TextPart(f'seen {len(messages)} messages, prompts {prompts}')])

    async def main():
        state = HarnessState.model_validate_json(Path(sys.argv[1]).read_text())
        executable = AgentDefinition(model=scripted_model(script)).build()
        result = await executable.run('Review it', previous_state=state)
        Path(sys.argv[2]).write_text(json.dumps(
            {'run_id': result.run_id, 'output': result.output, 'state': json.loads(result.state.model_dump_json())}
        ))

    asyncio.run(main())
    """
)


@pytest.mark.services
def test_state_saved_in_one_process_continues_in_another(tmp_path: Path):
    def script(messages, info):
        return ModelResponse(parts=[TextPart("Plan: three steps.")])

    first: HarnessRunResult[str] = asyncio.run(
        AgentDefinition(model=scripted_model(script))
        .build()
        .run("Draft the plan", previous_state=HarnessState.new(thread_id="thr_crossprocess1"))
    )
    saved, answer = tmp_path / "state.json", tmp_path / "answer.json"
    assert first.state is not None
    saved.write_text(first.state.model_dump_json())

    subprocess.run(
        [sys.executable, "-c", CONTINUE, str(saved), str(answer)],
        check=True,
        cwd=Path(__file__).resolve().parents[2],
        timeout=120,
    )

    reply = json.loads(answer.read_text())
    continued = HarnessState.model_validate(reply["state"])
    assert continued.thread_id == first.thread_id == "thr_crossprocess1"
    assert reply["run_id"] != first.run_id
    assert reply["output"] == "seen 3 messages, prompts ['Draft the plan', 'Review it']"
    assert continued.message_history[:2] == first.state.message_history
    assert len(continued.message_history) == 4
