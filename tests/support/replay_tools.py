"""A changed version of the demo's tools, as a replay sees a later release: `lookup_record` now takes `record`
instead of `record_id`, so the arguments the recording holds no longer validate."""

from __future__ import annotations

from pydantic_ai import Tool
from pydantic_ai.toolsets import FunctionToolset

from runs.harness.demo import demo_tools


def lookup_record(record: str) -> str:
    """Read one record by id."""
    return f"{record}: status=active"


def toolset() -> FunctionToolset:
    tools = [tool for name, tool in demo_tools().items() if name != "lookup_record"]
    return FunctionToolset([*tools, Tool(lookup_record)])
