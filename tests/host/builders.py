"""Rows and stream items for host tests."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic_ai.messages import PartDeltaEvent, PartEndEvent, PartStartEvent, TextPart, TextPartDelta

from runs.harness import HarnessEvent, HarnessRunResult, HarnessRunResultEvent, HarnessState
from runs.harness._events import run_started_event
from runs.models import AgentProfile, Run, Thread
from runs.services import executions, leases, policy

RUN_ID = "run-" + "a" * 32


def profile(*, name: str = "plain", model: str = "test", tools: list[str] | None = None) -> AgentProfile:
    return AgentProfile.objects.create(name=name, model=model, instructions="Be brief.", enabled_tools=tools or [])


def configure_policy(**values: Any) -> None:
    """Publish a new version of the default policy (created on first use) with these values."""
    current = executions.current_policy_version()
    policy.publish_policy_version(current.policy, created_by=None, comment="test", **values)


def thread(model: str = "test", tools: list[str] | None = None) -> Thread:
    return executions.create_thread(profile(name=f"p{AgentProfile.objects.count()}", model=model, tools=tools))


def queued_run(text: str = "hello", *, on: Thread | None = None) -> Run:
    execution = executions.start_execution(on or thread(), text)
    return execution.runs.get()


def now() -> datetime:
    return datetime.now(UTC)


def text_items(thread_id: str, run_id: str = RUN_ID, *, text: str = "Hello there") -> list[Any]:
    """A run's items: started, one streamed text part, and (separately) its completed result."""
    return [
        HarnessEvent(thread_id, run_id, 0, now(), run_started_event()),
        HarnessEvent(thread_id, run_id, 1, now(), PartStartEvent(index=0, part=TextPart(content=text[:5]))),
        HarnessEvent(thread_id, run_id, 2, now(), PartDeltaEvent(index=0, delta=TextPartDelta(content_delta=text[5:]))),
        HarnessEvent(thread_id, run_id, 3, now(), PartEndEvent(index=0, part=TextPart(content=text))),
    ]


def completed(thread_id: str, run_id: str, sequence: int, text: str = "Hello there") -> HarnessRunResultEvent[Any]:
    state = HarnessState.new(thread_id=thread_id)
    result = HarnessRunResult(thread_id=thread_id, run_id=run_id, status="completed", output=text, state=state)
    return HarnessRunResultEvent(thread_id, run_id, sequence, now(), result)


def leased_run() -> tuple[Run, leases.Lease]:
    """A queued run whose lease is taken, bound to `RUN_ID` (as the worker binds the engine's run id)."""
    run = queued_run()
    lease = leases.acquire(run.pk)
    assert lease is not None
    Run.objects.filter(pk=run.pk).update(run_id=RUN_ID)
    run.refresh_from_db()
    return run, lease
