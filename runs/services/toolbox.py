"""The host tool registry: the tools an agent profile may enable, by name.

Profiles store tool names (`AgentProfile.enabled_tools`); a run resolves them here into native pydantic-ai
`Tool`s. The registry holds the tools of the offline demo agent (`runs.harness.demo`), including its inline
researcher delegation; recovery-retryable ones carry the harness metadata already, so the Host keeps no list
of its own.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from pydantic_ai import Tool

from runs.harness.demo import demo_definition

__all__ = ("get_tool", "resolve", "tool_names")


@cache
def _registry() -> dict[str, Tool[Any]]:
    return {tool.name: tool for tool in demo_definition().tools}


def tool_names() -> list[str]:
    return sorted(_registry())


def get_tool(name: str) -> Tool[Any] | None:
    return _registry().get(name)


def resolve(names: list[str]) -> list[Tool[Any]]:
    """The tools of a profile; an unknown name is an error, not a silently smaller agent."""
    registry = _registry()
    unknown = [name for name in names if name not in registry]
    if unknown:
        raise LookupError(f"the profile enables tools this Host does not have: {', '.join(unknown)}")
    return [registry[name] for name in names]
