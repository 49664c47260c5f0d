"""Retained inline children: the `a13n.subagents` capability namespace.

A parent keeps the latest state of each inline child it delegated to, so a later delegation to the same child
continues the child's own Thread. The record's `thread_id` is the identity the child continues under; a fork
of the parent gives every record a fresh id, and the stored child state is forked to it lazily when loaded.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from ._state import THREAD_ID_PATTERN, AgentContextStateSnapshot, CapabilityState, HarnessState, new_thread_id

__all__ = (
    "SUBAGENTS_NAMESPACE",
    "SUBAGENTS_VERSION",
    "RetainedChild",
    "RetainedChildren",
    "rethread_retained_children",
)

SUBAGENTS_NAMESPACE = "a13n.subagents"
SUBAGENTS_VERSION = "1"


class RetainedChild(BaseModel):
    model_config = ConfigDict(frozen=True, extra="allow")

    thread_id: str = Field(max_length=256, pattern=THREAD_ID_PATTERN)
    state: dict[str, JsonValue]

    def load_state(self) -> HarnessState:
        """The child's state under this record's thread id (forked if the parent was forked)."""
        state = HarnessState.model_validate(self.state)
        return state if state.thread_id == self.thread_id else state.fork(thread_id=self.thread_id)


class RetainedChildren(BaseModel):
    model_config = ConfigDict(frozen=True, extra="allow")

    children: dict[str, RetainedChild] = Field(default_factory=dict)


def rethread_retained_children(snapshot: AgentContextStateSnapshot) -> AgentContextStateSnapshot:
    entry = snapshot.get(SUBAGENTS_NAMESPACE)
    if entry is None or entry.version != SUBAGENTS_VERSION:
        return snapshot
    retained = RetainedChildren.model_validate(entry.data)
    rethreaded = retained.model_copy(
        update={
            "children": {
                name: child.model_copy(update={"thread_id": new_thread_id()})
                for name, child in retained.children.items()
            }
        }
    )
    entries = snapshot.entries
    entries[SUBAGENTS_NAMESPACE] = CapabilityState(version=SUBAGENTS_VERSION, data=rethreaded.model_dump(mode="json"))
    return AgentContextStateSnapshot(entries=entries)
