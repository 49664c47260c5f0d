"""The tools of the approval tests: a payment and a deletion, which the tests' host policies stop for approval.

`tests/factories.py` builds suspended executions that wait on them (`suspended_execution`).
"""

from __future__ import annotations

from pydantic_ai import Tool


def send_payment(amount: int, to: str) -> str:
    """Send money."""
    return f"sent {amount} to {to}"


def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


TOOLS = {tool.name: tool for tool in (Tool(send_payment), Tool(delete_file))}
