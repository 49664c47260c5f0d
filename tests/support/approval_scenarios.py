"""The tools of the approval tests: a payment and a deletion, which the tests' host policies stop for approval.

The `scenario_tools` fixture adds `toolset` to the HARNESS_TOOLSETS setting; `tests/support/factories.py` builds
suspended executions that wait on these tools (`suspended_execution`).
"""

from __future__ import annotations

from pydantic_ai.toolsets import FunctionToolset


def send_payment(amount: int, to: str) -> str:
    """Send money."""
    return f"sent {amount} to {to}"


def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


toolset = FunctionToolset([send_payment, delete_file])
TOOLS = toolset.tools
