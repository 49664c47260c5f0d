"""Budgets: a model request the Host's budget does not allow is not made, and waits for an approver's override.

The Host decides "over or not" (`BudgetCheck`, given what this run has spent so far); the engine only asks it before
each model request. When a budget is spent the request is skipped (`SkipModelRequest`) with a response that calls
`over_budget`, a tool that always needs approval, so the run suspends through the ordinary deferred path.
Approving runs the tool, and the request that follows its return is made unchecked: one request per override.
Denying fails the run (`budget_exceeded`) before any further request, instead of handing the refusal to the
model, which would need another request to read it.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict
from pydantic_ai import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RunContext,
    SkipModelRequest,
    Tool,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.toolsets import FunctionToolset
from pydantic_ai.usage import RunUsage

from ._errors import HarnessError

__all__ = (
    "BUDGET_CAPABILITY_ID",
    "BUDGET_EXCEEDED",
    "OVER_BUDGET_TOOL",
    "BudgetCapability",
    "BudgetCheck",
    "OverBudget",
)

BUDGET_CAPABILITY_ID = "host.budget"
OVER_BUDGET_TOOL = "over_budget"
BUDGET_EXCEEDED = "budget_exceeded"
OVERRIDE_TEXT = "An approver allowed one more model request over the budget."


class OverBudget(BaseModel):
    """Which budget a model request would go over: the arguments of the `over_budget` call an approver sees."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    budget: str
    spent: str
    limit: str
    window: Literal["day", "month"]


# Given this run's usage so far, the first budget that is spent, or None.
BudgetCheck = Callable[[RunUsage], Awaitable[OverBudget | None]]


def over_budget(budget: str, spent: str, limit: str, window: Literal["day", "month"]) -> str:
    """Asks an approver to allow one model request over a spent budget (the Host calls it, never the model)."""
    return OVERRIDE_TEXT


def _last_budget_return(ctx: RunContext[Any]) -> ToolReturnPart | None:
    last = ctx.messages[-1] if ctx.messages else None
    if not isinstance(last, ModelRequest):
        return None
    return next(
        (part for part in last.parts if isinstance(part, ToolReturnPart) and part.tool_name == OVER_BUDGET_TOOL),
        None,
    )


def _is_budget_part(part: object) -> bool:
    return isinstance(part, ToolCallPart | ToolReturnPart) and part.tool_name == OVER_BUDGET_TOOL


def _without_budget_parts(messages: list[ModelMessage]) -> list[ModelMessage]:
    """The messages with the budget's calls and returns left out, and a message holding nothing else dropped."""
    kept: list[ModelMessage] = []
    for message in messages:
        if not any(_is_budget_part(part) for part in message.parts):
            kept.append(message)
        elif isinstance(message, ModelRequest):
            request_parts = [part for part in message.parts if not _is_budget_part(part)]
            kept.extend([dataclasses.replace(message, parts=request_parts)] if request_parts else [])
        else:
            response_parts = [part for part in message.parts if not _is_budget_part(part)]
            kept.extend([dataclasses.replace(message, parts=response_parts)] if response_parts else [])
    return kept


@dataclasses.dataclass
class BudgetCapability(AbstractCapability[Any]):
    check: BudgetCheck | None = None
    id: str = BUDGET_CAPABILITY_ID

    def get_toolset(self) -> FunctionToolset[Any]:
        return FunctionToolset([Tool(over_budget, name=OVER_BUDGET_TOOL, requires_approval=True)])

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        answered = _last_budget_return(ctx)
        if answered is not None and answered.outcome == "denied":
            raise HarnessError(
                "The run went over its budget and the approver did not allow more.", code=BUDGET_EXCEEDED
            )
        # The model never sees the budget's call nor its tool: they are the Host's business, not the task's.
        parameters = request_context.model_request_parameters
        visible = [tool for tool in parameters.function_tools if tool.name != OVER_BUDGET_TOOL]
        request_context = dataclasses.replace(
            request_context,
            messages=_without_budget_parts(request_context.messages),
            model_request_parameters=dataclasses.replace(parameters, function_tools=visible),
        )
        # An override allows the one request after it. An unanswered call a recovery closed is no answer: ask again.
        if (answered is not None and answered.outcome == "success") or self.check is None:
            return request_context
        verdict = await self.check(ctx.usage)
        if verdict is None:
            return request_context
        call = ToolCallPart(OVER_BUDGET_TOOL, verdict.model_dump(), tool_call_id=f"budget-{uuid.uuid4().hex[:12]}")
        raise SkipModelRequest(ModelResponse(parts=[call]))
