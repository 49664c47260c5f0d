"""Host-managed children: a tool whose call hands a task to a child execution the Host runs on its own thread.

Unlike an inline child (`_delegation.py`), which runs inside the parent's tool call and cannot wait for
anyone, a Host-managed child is an ordinary run of its own: it can suspend for approvals and recover from its
own checkpoints. The engine only defers the call (native `CallDeferred`, kind "external") with a
`ChildRequest` under `CHILD_METADATA_KEY`; the suspended result lists it among `PendingDeferredCalls.children`.
The Host starts the child and, when the child ends, answers the call like any external call: the child's
output as the result, a failure or cancellation as `ToolFailed`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field
from pydantic_ai import CallDeferred, ModelRetry, Tool

__all__ = ("CHILD_METADATA_KEY", "ChildRequest", "child_request_of", "host_child_tool")

CHILD_METADATA_KEY: Final = "a13n.child"


class ChildRequest(BaseModel):
    """What a parent asks of a Host-managed child: the task, and the agent profile to run it on (`None`: the
    parent's own)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    prompt: str = Field(min_length=1)
    profile: str | None = None


def child_request_of(metadata: Mapping[str, Any] | None) -> ChildRequest | None:
    """The child request a deferred call's metadata carries, or `None` for any other deferred call."""
    if not metadata or CHILD_METADATA_KEY not in metadata:
        return None
    return ChildRequest.model_validate(metadata[CHILD_METADATA_KEY])


def host_child_tool(name: str, *, description: str, profile: str | None = None) -> Tool[Any]:
    """A tool `name(task)` whose call suspends the run until a Host-managed child execution did `task`.

    `profile` names the agent profile the Host runs the child on; `None` runs it on the parent's profile.
    """

    def delegate(task: str) -> str:
        if not task.strip():
            raise ModelRetry("The task for the child is empty; say what the child should do.")
        request = ChildRequest(prompt=task, profile=profile)
        raise CallDeferred(metadata={CHILD_METADATA_KEY: request.model_dump(mode="json")})

    return Tool(delegate, name=name, description=description)
