"""Declaring tools whose unanswered calls may be repeated after a crash.

The declaration is plain tool metadata, so it travels through every pydantic-ai mechanism that produces
`ToolDefinition`s (function tools, `SetToolMetadata`, dynamic toolsets) and is read from the freshly prepared
definitions of the resuming run, never from saved messages.
"""

from __future__ import annotations

from copy import copy
from typing import Any, Final, overload

from pydantic_ai import Tool, ToolDefinition
from pydantic_ai.tools import AgentDepsT, ToolFuncEither

__all__ = (
    "RECOVERY_RETRY_SAFE_METADATA_KEY",
    "is_recovery_retryable",
    "recovery_retryable",
)

RECOVERY_RETRY_SAFE_METADATA_KEY: Final = "a13n.harness.recovery_retry_safe"
"""`ToolDefinition.metadata` key; only the boolean `True` declares a tool recovery-retryable."""


@overload
def recovery_retryable(tool_or_function: Tool[AgentDepsT], /) -> Tool[AgentDepsT]: ...


@overload
def recovery_retryable(tool_or_function: ToolFuncEither[AgentDepsT, ...], /) -> Tool[AgentDepsT]: ...


def recovery_retryable(tool_or_function: Any, /) -> Tool[Any]:
    """Declare that repeating this tool's call is acceptable even when its earlier outcome is unknown.

    Works as a decorator, on a bound method, or on an existing native `Tool`. Returns a native `Tool` that
    differs only by the metadata key: execution is not wrapped, and an existing `Tool` is copied so the
    original (and every other setting and metadata entry) stays as it was.
    """
    tool = copy(tool_or_function) if isinstance(tool_or_function, Tool) else Tool(tool_or_function)
    tool.metadata = {**(tool.metadata or {}), RECOVERY_RETRY_SAFE_METADATA_KEY: True}
    return tool


def is_recovery_retryable(tool_def: ToolDefinition) -> bool:
    """Whether a prepared definition declares its tool recovery-retryable (`1` or `'true'` do not count)."""
    return (tool_def.metadata or {}).get(RECOVERY_RETRY_SAFE_METADATA_KEY) is True
