"""`HarnessAguiStreamObserver`: one root Harness Run stream together with its inline child runs."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from ag_ui.core import (
    BaseEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    SubagentErrorEvent,
    SubagentFinishedEvent,
    SubagentFinishedSuccessOutcome,
    SubagentStartedEvent,
)

from runs.harness import HarnessEvent, HarnessExtensionEvent, InlineDelegationPayload

from ._continuation import ConversionSnapshot, RunSnapshot
from ._conversion import RunConversion, RunConversionState, SourceItem
from ._errors import AguiObservationError
from ._ids import IdClaims
from ._observer import HarnessAguiObserver

__all__ = ("HarnessAguiStreamObserver", "StreamConversionState")

_RUN_SCOPED = (RunStartedEvent, RunFinishedEvent, RunErrorEvent)
_EMPTY_RUN = RunConversionState()


@dataclasses.dataclass(frozen=True, slots=True)
class StreamConversionState:
    """Per-run conversion state (root and every live child, flat) and the thread each seen run belongs to."""

    runs: Mapping[str, RunConversionState] = dataclasses.field(default_factory=lambda: MappingProxyType({}))
    threads: Mapping[str, str] = dataclasses.field(default_factory=lambda: MappingProxyType({}))


class HarnessAguiStreamObserver(HarnessAguiObserver):
    """Projects a root run stream with the items of its inline children into one AG-UI stream.

    The first item binds the root run. Every other run id is taken to be an inline child (grandchildren
    included): its items are converted with their own cursors, its own RUN_* events are dropped, and all its
    other events carry `subagentRunId`; its tool call and message ids are namespaced by its run id (`ids.py`),
    so they cannot collide with the parent's. The observer does not prove that a run belongs to this root;
    routing unrelated runs here is a Host bug it cannot detect.
    """

    _state: StreamConversionState
    _continuation_kind = "stream"

    def _initial_state(self) -> Any:
        return StreamConversionState()

    def _exported_runs(self) -> tuple[dict[str, RunSnapshot], dict[str, str]]:
        runs = {run_id: RunSnapshot.of(state) for run_id, state in self._state.runs.items()}
        return runs, dict(self._state.threads)

    def _restored_state(self, run_id: str, thread_id: str, snapshot: ConversionSnapshot) -> Any:
        if snapshot.threads.get(run_id) != thread_id or not set(snapshot.runs) <= set(snapshot.threads):
            raise AguiObservationError("a stream observer's continuation names the thread of every run it holds")
        return StreamConversionState(
            runs=MappingProxyType({child: state.state() for child, state in snapshot.runs.items()}),
            threads=MappingProxyType(dict(snapshot.threads)),
        )

    def _check_correlation(self, item: SourceItem) -> None:
        known = self._state.threads.get(item.run_id)
        if known is not None and known != item.thread_id:
            raise AguiObservationError(
                f"thread correlation of run {item.run_id!r} changed from {known!r} to {item.thread_id!r}"
            )

    def _convert(self, item: SourceItem, ids: IdClaims) -> tuple[Any, list[BaseEvent]]:
        state = self._state
        root = self._run_id or item.run_id
        attribution = None if item.run_id == root else item.run_id
        events: list[BaseEvent] = []
        conversion = RunConversion(
            state.runs.get(item.run_id, _EMPTY_RUN), item, events, ids=ids, subagent_run_id=attribution
        )
        delegation = _delegation(item)
        released: str | None = None
        if delegation is None or delegation.child_run_id is None:
            conversion.convert()
            if attribution is not None:
                events[:] = [event for event in events if not isinstance(event, _RUN_SCOPED)]
        elif delegation.action == "started":
            parent_run = None if delegation.parent_run_id == root else delegation.parent_run_id
            parent_call = delegation.parent_tool_call_id
            if parent_call is not None:
                # The id the parent's lane shows for the call, so a client can nest the child under it.
                parent_call = RunConversion(
                    state.runs.get(delegation.parent_run_id or root, _EMPTY_RUN), item, [], subagent_run_id=parent_run
                ).tool_call_id(parent_call)
            events.append(
                SubagentStartedEvent(
                    subagent_run_id=delegation.child_run_id,
                    name=delegation.subagent,
                    parent_tool_call_id=parent_call,
                    parent_subagent_run_id=parent_run,
                    timestamp=conversion.timestamp,
                )
            )
            conversion.convert()
        else:
            released = delegation.child_run_id
            child = conversion
            if released != item.run_id:
                child = RunConversion(
                    state.runs.get(released, _EMPTY_RUN),
                    item,
                    events,
                    ids=ids,
                    run_id=released,
                    subagent_run_id=released,
                )
            child.close_messages()
            if delegation.action == "completed":
                events.append(
                    SubagentFinishedEvent(
                        subagent_run_id=released,
                        outcome=SubagentFinishedSuccessOutcome(),
                        timestamp=conversion.timestamp,
                    )
                )
            else:
                events.append(
                    SubagentErrorEvent(
                        subagent_run_id=released,
                        message=f"Inline delegation {delegation.status}.",
                        code=delegation.status,
                        timestamp=conversion.timestamp,
                    )
                )
            conversion.convert()
        return _next_state(state, item, conversion.state(), released), events


def _delegation(item: SourceItem) -> InlineDelegationPayload | None:
    if not isinstance(item, HarnessEvent):
        return None
    event = item.event
    if not isinstance(event, HarnessExtensionEvent) or event.kind != "delegation":
        return None
    if event.payload_type != "inline_delegation":
        return None
    # An invalid payload fails the item with pydantic's own error: it is a harness bug, not a projection one.
    return InlineDelegationPayload.model_validate(event.payload)


def _next_state(
    state: StreamConversionState, item: SourceItem, run_state: RunConversionState, released: str | None
) -> StreamConversionState:
    runs, threads = state.runs, state.threads
    if runs.get(item.run_id) is not run_state or (released is not None and released in runs):
        changed = dict(runs)
        changed[item.run_id] = run_state
        if released is not None:
            # The child is over; its cursors would only ever be stale.
            changed.pop(released, None)
        runs = MappingProxyType(changed)
    if item.run_id not in threads:
        threads = MappingProxyType({**threads, item.run_id: item.thread_id})
    if runs is state.runs and threads is state.threads:
        return state
    return StreamConversionState(runs, threads)
