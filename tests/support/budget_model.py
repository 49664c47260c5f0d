"""A model that answers every request with one line of text and counts the requests it was sent.

For the budget tests: `HARNESS_DEMO_MODEL=tests.support.budget_model.model` with a profile whose model is "demo".
`CALLS` holds, per request made in this process, how many messages it was sent (a worker process counts its own).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from pydantic_ai import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

__all__ = ("CALLS", "REPLY", "model")

CALLS: list[int] = []
REPLY = "within budget again"


def _reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    CALLS.append(len(messages))
    return ModelResponse(parts=[TextPart(REPLY)])


async def _stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
    CALLS.append(len(messages))
    yield REPLY


def model() -> FunctionModel:
    return FunctionModel(_reply, stream_function=_stream)
