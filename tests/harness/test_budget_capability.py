"""The budget capability alone: what it does before a model request for each answer the history holds."""

from __future__ import annotations

import asyncio
from typing import Literal

import pytest
from pydantic_ai import (
    ModelRequest,
    ModelResponse,
    RunContext,
    SkipModelRequest,
    ToolCallPart,
    ToolDefinition,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestContext, ModelRequestParameters
from pydantic_ai.models.test import TestModel
from pydantic_ai.usage import RunUsage

from runs.harness import BUDGET_EXCEEDED, OVER_BUDGET_TOOL, BudgetCapability, HarnessError, OverBudget

SPENT = OverBudget(budget="profile p, 10 tokens a day", spent="12", limit="10", window="day")
PROMPT = ModelRequest(parts=[UserPromptPart("hi")])
ReturnOutcome = Literal["success", "failed", "denied", "interrupted", "retried"]


class CountingCheck:
    def __init__(self, verdict: OverBudget | None) -> None:
        self.verdict = verdict
        self.asked: list[RunUsage] = []

    async def __call__(self, usage: RunUsage) -> OverBudget | None:
        self.asked.append(usage)
        return self.verdict


def history(outcome: ReturnOutcome | None) -> list[ModelRequest | ModelResponse]:
    """A prompt, then (unless `outcome` is None) the budget's call and its return with `outcome`."""
    messages: list[ModelRequest | ModelResponse] = [PROMPT]
    if outcome is not None:
        messages += [
            ModelResponse(parts=[ToolCallPart(OVER_BUDGET_TOOL, SPENT.model_dump(), tool_call_id="b1")]),
            ModelRequest(parts=[ToolReturnPart(OVER_BUDGET_TOOL, "ok", tool_call_id="b1", outcome=outcome)]),
        ]
    return messages


def before_request(capability: BudgetCapability, outcome: ReturnOutcome | None) -> ModelRequestContext:
    model = TestModel()
    messages = history(outcome)
    ctx = RunContext(deps=None, model=model, usage=RunUsage(input_tokens=3), messages=list(messages))
    tools = [ToolDefinition(name=OVER_BUDGET_TOOL), ToolDefinition(name="lookup")]
    request = ModelRequestContext(
        model=model,
        messages=list(messages),
        model_settings=None,
        model_request_parameters=ModelRequestParameters(function_tools=tools),
    )
    return asyncio.run(capability.before_model_request(ctx, request))


def test_a_spent_budget_skips_the_request_with_a_call_of_over_budget():
    check = CountingCheck(SPENT)

    with pytest.raises(SkipModelRequest) as skipped:
        before_request(BudgetCapability(check=check), None)

    (call,) = skipped.value.response.parts
    assert isinstance(call, ToolCallPart) and call.tool_name == OVER_BUDGET_TOOL
    assert call.args == SPENT.model_dump()
    assert [usage.input_tokens for usage in check.asked] == [3]


def test_an_override_allows_the_next_request_unchecked_and_the_model_sees_no_budget_part():
    check = CountingCheck(SPENT)

    request = before_request(BudgetCapability(check=check), "success")

    assert check.asked == []
    assert request.messages == [PROMPT]
    assert [tool.name for tool in request.model_request_parameters.function_tools] == ["lookup"]


def test_a_denied_override_fails_the_run_before_the_request():
    check = CountingCheck(None)

    with pytest.raises(HarnessError) as failed:
        before_request(BudgetCapability(check=check), "denied")

    assert failed.value.code == BUDGET_EXCEEDED
    assert check.asked == []


@pytest.mark.parametrize("outcome", ["interrupted", "failed"])
def test_a_call_closed_without_an_answer_asks_the_budget_again(outcome):
    check = CountingCheck(SPENT)

    with pytest.raises(SkipModelRequest):
        before_request(BudgetCapability(check=check), outcome)

    assert len(check.asked) == 1


def test_within_budget_the_request_goes_on():
    check = CountingCheck(None)

    request = before_request(BudgetCapability(check=check), None)

    assert len(check.asked) == 1
    assert request.messages == [PROMPT]
