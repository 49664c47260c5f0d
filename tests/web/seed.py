"""Timeline rows written straight into the database, for page and websocket tests that need no worker.

Events are built with ag-ui-protocol's classes and stored in the standard encoding (by alias, without None),
the same way the projection stores them.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from ag_ui.core import (
    BaseEvent,
    RunFinishedEvent,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
)

from runs.models import AgentProfile, Execution, HostPolicy, HostPolicyVersion, Run, Thread, TimelineEvent

_counter = itertools.count(1)
START = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
UNFINISHED = {"queued", "running"}


def encoded(event: BaseEvent) -> dict:
    return event.model_dump(mode="json", by_alias=True, exclude_none=True)


def make_thread(title: str = "Seeded thread") -> Thread:
    profile, _ = AgentProfile.objects.get_or_create(name="seeded", defaults={"model": "demo"})
    n = next(_counter)
    return Thread.objects.create(thread_id=f"thread-seed-{n:06d}", title=title, profile=profile)


def policy_version() -> HostPolicyVersion:
    policy, _ = HostPolicy.objects.get_or_create(name="default")
    version, _ = HostPolicyVersion.objects.get_or_create(policy=policy, number=1)
    return version


def make_execution(thread: Thread | None = None, *, status: str = "running", input: str = "hello") -> Execution:
    thread = thread or make_thread()
    number = thread.executions.count() + 1
    return Execution.objects.create(
        thread=thread, number=number, input=input, status=status, policy_version=policy_version()
    )


def make_run(execution: Execution, *, reason: str = "initial", status: str = "running", **fields) -> Run:
    number = execution.runs.count() + 1
    return Run.objects.create(
        execution=execution,
        number=number,
        run_id=fields.pop("run_id", f"run-{execution.pk}-{number}-{next(_counter)}"),
        reason=reason,
        status=status,
        policy_version=execution.policy_version,
        started_at=fields.pop("started_at", START),
        finished_at=fields.pop("finished_at", None if status in UNFINISHED else START + timedelta(seconds=4)),
        **fields,
    )


def append_events(run: Run, events: Iterable[BaseEvent], *, subagent_run_id: str = "") -> list[TimelineEvent]:
    """Append events at the next positions of the run's execution (the caller is the only writer)."""
    last = run.execution.timeline.order_by("-position").values_list("position", flat=True).first() or 0
    rows = []
    for offset, event in enumerate(events, start=1):
        data = encoded(event)
        occurred_at = START + timedelta(milliseconds=last + offset)
        # The projection stamps every event with its source item's time.
        data.setdefault("timestamp", int(occurred_at.timestamp() * 1000))
        rows.append(
            TimelineEvent(
                execution=run.execution,
                position=last + offset,
                run=run,
                subagent_run_id=subagent_run_id or data.get("subagentRunId", ""),
                event_type=data["type"],
                event=data,
                occurred_at=occurred_at,
            )
        )
    return TimelineEvent.objects.bulk_create(rows)


def text_run_events(run: Run, text_chunks: Iterable[str], *, message_id: str = "m1", finish: bool = True):
    """A run that streams one assistant message in chunks."""
    thread_id = run.execution.thread.thread_id
    events: list[BaseEvent] = [
        RunStartedEvent(thread_id=thread_id, run_id=run.run_id),
        TextMessageStartEvent(message_id=message_id, role="assistant"),
    ]
    events += [TextMessageContentEvent(message_id=message_id, delta=chunk) for chunk in text_chunks]
    events.append(TextMessageEndEvent(message_id=message_id))
    if finish:
        events.append(RunFinishedEvent(thread_id=thread_id, run_id=run.run_id, outcome={"type": "success"}))
    return events
