"""Stream helpers shared by the harness tests."""

from __future__ import annotations

from typing import Any

from pydantic_ai import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo

from runs.harness import HarnessRunStream, HarnessStreamEvent, Script


async def collect(stream: HarnessRunStream[Any]) -> list[HarnessStreamEvent[Any]]:
    """Enter `stream` and return every item it yields, the terminal result last."""
    async with stream:
        return [item async for item in stream]


def call_then_echo(tool_name: str, call_id: str) -> Script:
    """A model script that calls `tool_name` once, then answers with the tool's result as its text."""

    def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = [part for part in messages[-1].parts if isinstance(part, ToolReturnPart)]
        if returns:
            return ModelResponse(parts=[TextPart(returns[0].model_response_str())])
        return ModelResponse(parts=[ToolCallPart(tool_name, {}, call_id)])

    return script
