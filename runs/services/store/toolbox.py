"""The host tool registry: the tools an agent profile may enable, by name.

Profiles store tool names (`AgentProfile.enabled_tools`); a run resolves them here into native pydantic-ai
`Tool`s. The tools come from the tool sets the `HARNESS_TOOLSETS` setting names (dotted paths to a
`FunctionToolset` or to a function returning one; by default the offline demo agent's, `runs.harness.demo`).
Recovery-retryable tools carry the harness metadata already, so the Host keeps no list of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils.module_loading import import_string
from pydantic_ai import Tool
from pydantic_ai.toolsets import FunctionToolset

__all__ = ("get_tool", "registry", "resolve", "tool_names", "unknown")


def _toolset(path: str) -> FunctionToolset[Any]:
    try:
        named = import_string(path)
    except ImportError as exc:
        raise ImproperlyConfigured(f"HARNESS_TOOLSETS names {path!r}, which cannot be imported: {exc}") from exc
    toolset = named if isinstance(named, FunctionToolset) or not callable(named) else named()
    if not isinstance(toolset, FunctionToolset):
        raise ImproperlyConfigured(
            f"HARNESS_TOOLSETS names {path!r}, which is not a pydantic-ai FunctionToolset or a function returning one."
        )
    return toolset


@cache
def _registry() -> dict[str, Tool[Any]]:
    tools: dict[str, Tool[Any]] = {}
    for path in settings.HARNESS_TOOLSETS:
        for name, tool in _toolset(path).tools.items():
            if name in tools:
                # A profile names tools by name alone, so two tools of one name would make it ambiguous.
                raise ImproperlyConfigured(f"Two tool sets of HARNESS_TOOLSETS offer a tool named {name!r}.")
            tools[name] = tool
    return tools


@receiver(setting_changed)
def _forget_tools(*, setting: str, **kwargs: Any) -> None:
    if setting == "HARNESS_TOOLSETS":
        _registry.cache_clear()


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
