"""A second tool plug-in, written as a user of the Host would: a tool set and an offline model that uses it.

`HARNESS_TOOLSETS=tests.support.plugin_tools.toolset` offers `count_words` instead of the demo's tools, and
`HARNESS_DEMO_MODEL=tests.support.plugin_tools.model` makes a profile whose model is "demo" call it once, then answer.
"""

from __future__ import annotations

from pydantic_ai import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import FunctionToolset

from runs.harness import recovery_retryable, scripted_model


def count_words(text: str) -> int:
    """Count the words of a text."""
    return len(text.split())


toolset = FunctionToolset([recovery_retryable(count_words)])


def _script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    returned = [part for message in messages for part in message.parts if isinstance(part, ToolReturnPart)]
    if returned:
        return ModelResponse(parts=[TextPart(f"The text has {returned[-1].content} words.")])
    return ModelResponse(parts=[ToolCallPart("count_words", {"text": "one two three four"}, tool_call_id="count-1")])


def model() -> FunctionModel:
    return scripted_model(_script, model_name="plugin-scripted")
