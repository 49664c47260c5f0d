"""The host tool registry: the tools an agent profile may enable, by name.

Profiles store tool names (`AgentProfile.enabled_tools`); a run resolves them here into native pydantic-ai
`Tool`s. The registry holds the tools of the offline demo agent (`runs.harness.demo`), including its inline
researcher delegation; recovery-retryable ones carry the harness metadata already, so the Host keeps no list
of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from pydantic_ai import Tool

from runs.harness.demo import demo_definition

__all__ = ("get_tool", "registry", "resolve", "tool_names", "unknown")


@cache
def _registry() -> dict[str, Tool[Any]]:
    return {tool.name: tool for tool in demo_definition().tools}


def registry() -> Mapping[str, Tool[Any]]:
    return _registry()


def tool_names() -> list[str]:
    return sorted(_registry())


def get_tool(name: str) -> Tool[Any] | None:
    return _registry().get(name)


def unknown(names: list[str]) -> list[str]:
    """The names that are not in the registry, sorted."""
    return sorted(set(names) - set(_registry()))


def resolve(names: list[str]) -> list[Tool[Any]]:
    """The tools of a profile; an unknown name is an error, not a silently smaller agent."""
    missing = unknown(names)
    if missing:
        raise LookupError(f"the profile enables tools this Host does not have: {', '.join(missing)}")
    return [_registry()[name] for name in names]
