"""A tool that looks in the Host's dispatch ledger while it runs, to show what is durable before a tool starts.

`HARNESS_TOOLSETS=tests.support.ledger_probe.toolset` offers `look_in_ledger`, and
`HARNESS_DEMO_MODEL=tests.support.ledger_probe.model` makes a profile whose model is "demo" call it once, then
answer with what it saw.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from pydantic_ai import ModelMessage, ModelResponse, RunContext, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import FunctionToolset

from runs.harness import scripted_model
from runs.models import ToolDispatch

__all__ = ("model", "toolset")


async def look_in_ledger(ctx: RunContext[Any]) -> str:
    """Say whether this call's dispatch is in the ledger."""
    recorded = await sync_to_async(ToolDispatch.objects.filter(tool_call_id=ctx.tool_call_id).exists)()
    return "recorded" if recorded else "missing"


toolset = FunctionToolset([look_in_ledger])


def _script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    returned = [part for message in messages for part in message.parts if isinstance(part, ToolReturnPart)]
    if returned:
        return ModelResponse(parts=[TextPart(f"The ledger said: {returned[-1].content}.")])
    return ModelResponse(parts=[ToolCallPart("look_in_ledger", {}, tool_call_id="look-1")])


def model() -> FunctionModel:
    return scripted_model(_script, model_name="ledger-probe")
