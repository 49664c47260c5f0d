"""Builders of test data, in one place.

- Harness source items, stamped the way a Harness Run stream stamps them (`SourceRun`, `text_items`, `completed`).
- Rows made through the Host's own services, as a user's actions would make them (`thread`, `queued_run`,
  `leased_run`, `configure_policy`).
- Rows written straight into the database for page, socket and approval tests that need no worker
  (`make_thread`, `make_execution`, `make_run`, `append_events`, `suspended_execution`). Timeline events are
  built with ag-ui-protocol's classes and stored in the standard encoding (by alias, without None), as the
  projection stores them.
- Users, team memberships and credentials (`join_default_team`, `member`, `create_decider`, `token_for`).
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from ag_ui.core import (
    BaseEvent,
    RunFinishedEvent,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
)
from django.contrib.auth.models import Permission, User
from django.utils import timezone
from pydantic_ai import DeferredToolRequests as NativeDeferredToolRequests
from pydantic_ai import ModelRequest, ModelResponse, ToolCallPart, UserPromptPart
from pydantic_ai.messages import PartDeltaEvent, PartEndEvent, PartStartEvent, TextPart, TextPartDelta

from agui_api.auth import Caller
from agui_api.models import ApiToken, TokenScope, token_digest
from runs.harness import (
    DeferredToolCall,
    HarnessEvent,
    HarnessExtensionEvent,
    HarnessRunResult,
    HarnessRunResultEvent,
    HarnessState,
    InlineDelegationPayload,
    PendingDeferredCalls,
    RunOutcome,
    RunUsageSummary,
    SafeFailure,
    encode_item,
)
from runs.harness.demo import demo_tools
from runs.models import (
    DEFAULT_TEAM,
    AgentProfile,
    CheckpointKind,
    DeferredKind,
    DeferredRequest,
    Execution,
    ExecutionStatus,
    HostPolicy,
    HostPolicyVersion,
    JournalEntry,
    Membership,
    Run,
    RunStatus,
    Team,
    TeamRole,
    Thread,
    TimelineEvent,
)
from runs.services.lifecycle import executions
from runs.services.store import checkpoints, leases, policy
from runs.services.timeline import redactor_for
from tests.support.agui_http import PROFILE
from tests.support.approval_scenarios import TOOLS

# --- Harness source items ---------------------------------------------------------------------------------

RUN_ID = "run-" + "a" * 32
T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def now() -> datetime:
    return datetime.now(UTC)


def lifecycle_event(event_type: str, **payload: Any) -> HarnessExtensionEvent:
    """A lifecycle fact as the engine emits it: kind "lifecycle", the fact's name as the payload's `type`."""
    return HarnessExtensionEvent(kind="lifecycle", payload={"type": event_type, **payload})


def run_started_event() -> HarnessExtensionEvent:
    return lifecycle_event("run_started")


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


class SourceRun:
    """One run's stream: contiguous sequence numbers from 0 and increasing times."""

    def __init__(self, run_id: str = "run-1", thread_id: str = "thread_1", *, clock_ms: int = 0) -> None:
        self.run_id = run_id
        self.thread_id = thread_id
        self.sequence = 0
        self.clock_ms = clock_ms

    def _stamp(self) -> tuple[int, datetime]:
        sequence = self.sequence
        self.sequence += 1
        return sequence, T0 + timedelta(milliseconds=self.clock_ms + 7 * sequence)

    def item(self, event: Any) -> HarnessEvent:
        sequence, occurred_at = self._stamp()
        return HarnessEvent(self.thread_id, self.run_id, sequence, occurred_at, event)

    def started(self) -> HarnessEvent:
        return self.item(run_started_event())

    def request(self, index: int) -> HarnessEvent:
        return self.item(
            lifecycle_event("model_request_started", request_id=f"model-request-{index}", request_index=index)
        )

    def delegation(
        self,
        action: Literal["started", "completed", "failed"],
        child: SourceRun | None,
        *,
        status: str,
        parent_run_id: str,
        **extra: Any,
    ) -> HarnessEvent:
        payload = InlineDelegationPayload(
            invocation_id="delegation-" + "0" * 31 + "1",
            action=action,
            child_instance_id="child-instance",
            subagent="researcher",
            status=status,
            parent_run_id=parent_run_id,
            parent_agent_instance_id="root-instance",
            child_run_id=None if child is None else child.run_id,
            **extra,
        )
        return self.item(payload.to_event())

    def result(self, status: RunOutcome, **fields: Any) -> HarnessRunResultEvent[Any]:
        if status in ("completed", "suspended"):
            fields.setdefault("state", HarnessState.new(thread_id=self.thread_id))
        result = HarnessRunResult(thread_id=self.thread_id, run_id=self.run_id, status=status, **fields)
        sequence, occurred_at = self._stamp()
        return HarnessRunResultEvent(self.thread_id, self.run_id, sequence, occurred_at, result)

    def completed(self, output: Any = "done", **usage: int) -> HarnessRunResultEvent[Any]:
        return self.result("completed", output=output, usage=RunUsageSummary(**usage))

    def failed(self, code: str = "model_failed", message: str = "The model failed.") -> HarnessRunResultEvent[Any]:
        return self.result("failed", failure=SafeFailure(code=code, message=message))

    def cancelled(self) -> HarnessRunResultEvent[Any]:
        return self.result("cancelled")

    def suspended(
        self,
        approvals: Iterable[ToolCallPart] = (),
        calls: Iterable[ToolCallPart] = (),
        metadata: dict[str, dict[str, Any]] | None = None,
    ) -> HarnessRunResultEvent[Any]:
        deferred = PendingDeferredCalls(
            approvals=[DeferredToolCall(call, call, f"tool/native/{call.tool_name}") for call in approvals],
            calls=[DeferredToolCall(call, call, f"tool/native/{call.tool_name}") for call in calls],
            metadata=metadata or {},
        )
        return self.result("suspended", suspend_reason="deferred", deferred=deferred)


async def history(items: Iterable[Any]) -> AsyncIterator[Any]:
    """A finite async history, as a Host journal would replay it."""
    for item in items:
        yield item


# --- Rows made through the Host's services -----------------------------------------------------------------


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


def leased_run(*, run_id: str = RUN_ID) -> tuple[Run, leases.Lease]:
    """A queued run whose lease is taken, bound to `run_id` (as the worker binds the engine's run id)."""
    run = queued_run()
    lease = leases.acquire(run.pk)
    assert lease is not None
    Run.objects.filter(pk=run.pk).update(run_id=run_id)
    run.refresh_from_db()
    return run, lease


# --- Rows written straight into the database ---------------------------------------------------------------

_counter = itertools.count(1)
START = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
UNFINISHED = {"queued", "running"}


def encoded(event: BaseEvent) -> dict[str, Any]:
    return event.model_dump(mode="json", by_alias=True, exclude_none=True)


def shared_profile(name: str, *, tools: Iterable[str] = ()) -> AgentProfile:
    """The profile of this name on the demo model, made on first use."""
    return AgentProfile.objects.get_or_create(name=name, defaults={"model": "demo", "enabled_tools": sorted(tools)})[0]


def make_thread(title: str = "Seeded thread") -> Thread:
    n = next(_counter)
    return Thread.objects.create(thread_id=f"thread-seed-{n:06d}", title=title, profile=shared_profile("seeded"))


def policy_version() -> HostPolicyVersion:
    policy, _ = HostPolicy.objects.get_or_create(name="default")
    version, _ = HostPolicyVersion.objects.get_or_create(policy=policy, number=1)
    return version


def make_execution(thread: Thread | None = None, *, status: str = "running", input: str = "hello") -> Execution:
    thread = thread or make_thread()
    number = thread.executions.count() + 1
    version = policy_version()
    return Execution.objects.create(
        thread=thread,
        number=number,
        input=input,
        shown_input=redactor_for(version).text(input),
        status=status,
        policy_version=version,
    )


def make_run(execution: Execution, *, reason: str = "initial", status: str = "running", **fields: Any) -> Run:
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


def text_run_events(
    run: Run, text_chunks: Iterable[str], *, message_id: str = "m1", finish: bool = True
) -> list[BaseEvent]:
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


@dataclass
class Suspended:
    execution: Execution
    run: Run
    requests: dict[str, DeferredRequest]

    @property
    def checkpoint_id(self) -> int:
        checkpoint_id = self.execution.thread.selected_checkpoint_id
        assert checkpoint_id is not None, "a suspended execution's thread has a selected checkpoint"
        return checkpoint_id


def suspended_execution(
    *,
    approvals: tuple[ToolCallPart, ...] = (
        ToolCallPart("send_payment", {"amount": 5000, "to": "acme"}, tool_call_id="call-pay"),
        ToolCallPart("delete_file", {"path": "/srv/data"}, tool_call_id="call-del"),
    ),
    calls: tuple[ToolCallPart, ...] = (),
    questions: tuple[str, ...] = (),
    expires_in: timedelta | None = None,
    title: str = "payments",
) -> Suspended:
    thread = executions.create_thread(shared_profile("approvals-test"), title=title)
    version = executions.current_policy_version()
    number = thread.executions.count() + 1
    execution = Execution.objects.create(
        thread=thread,
        number=number,
        input="pay acme",
        shown_input=redactor_for(version).text("pay acme"),
        status=ExecutionStatus.WAITING,
        policy_version=version,
    )
    run_id = f"run-{thread.pk}-{number}"
    run = Run.objects.create(
        execution=execution, number=1, run_id=run_id, status=RunStatus.SUSPENDED, policy_version=version
    )
    pending = [*approvals, *calls]
    assert thread.selected_checkpoint is not None, "a new thread starts at its initial checkpoint"
    state = checkpoints.load(thread.selected_checkpoint).with_changes(
        message_history=[ModelRequest(parts=[UserPromptPart("pay acme")]), ModelResponse(parts=list(pending))]
    )
    deferred = PendingDeferredCalls.export(
        NativeDeferredToolRequests(calls=list(calls), approvals=list(approvals)),
        definitions={name: tool.tool_def for name, tool in TOOLS.items()},
    )
    result: HarnessRunResult[Any] = HarnessRunResult(
        thread_id=thread.thread_id,
        run_id=run_id,
        status="suspended",
        state=state,
        suspend_reason="deferred",
        deferred=deferred,
    )
    now = timezone.now()
    encoded = encode_item(HarnessRunResultEvent(thread.thread_id, run_id, 0, now, result))
    JournalEntry.objects.create(
        run=run,
        index=0,
        source_run_id=encoded.source_run_id,
        source_sequence=encoded.source_sequence,
        kind=encoded.kind,
        occurred_at=encoded.occurred_at,
        payload=encoded.payload,
        codec_version=encoded.codec_version,
    )
    terminal = checkpoints.create(thread, state, kind=CheckpointKind.TERMINAL, run=run, journal_index=0)
    thread.selected_checkpoint = terminal
    thread.save(update_fields=["selected_checkpoint"])
    expires_at = now + expires_in if expires_in is not None else None

    def request(call: ToolCallPart, kind: DeferredKind) -> DeferredRequest:
        return DeferredRequest.objects.create(
            execution=execution,
            run=run,
            checkpoint=terminal,
            tool_call_id=call.tool_call_id,
            tool_name=call.tool_name,
            kind=kind,
            args=call.args_as_dict(),
            reason=f"policy says {call.tool_name} needs a human",
            expires_at=expires_at,
        )

    rows = [request(call, DeferredKind.APPROVAL) for call in approvals]
    rows += [
        request(call, DeferredKind.QUESTION if call.tool_call_id in questions else DeferredKind.EXTERNAL)
        for call in calls
    ]
    execution.refresh_from_db()
    return Suspended(execution=execution, run=run, requests={row.tool_call_id: row for row in rows})


# --- Users and credentials ---------------------------------------------------------------------------------


def join_default_team(sender: Any, instance: Any, created: bool, raw: bool = False, **kwargs: Any) -> None:
    """A `post_save` receiver of the user model (tests/conftest.py connects it for every test): a new user joins
    the team `default` as an operator, the rights every user had before teams, so tests about something else need
    no membership. Tests of team access disconnect it (`tests.conftest.without_default_membership`)."""
    if created and not raw:
        Membership.objects.get_or_create(
            user=instance, team=Team.objects.get_or_create(name=DEFAULT_TEAM)[0], defaults={"role": TeamRole.OPERATOR}
        )


def member(
    user_model: type[User], username: str, team: Team, role: TeamRole | None, *, password: str = "pw-member-1"
) -> User:
    """A user whose only membership is `role` in `team` (none if `role` is None)."""
    user = user_model.objects.create_user(username, password=password)
    Membership.objects.filter(user=user).delete()
    if role is not None:
        Membership.objects.create(user=user, team=team, role=role)
    return user


def create_decider(user_model: type[User], username: str, password: str) -> User:
    """A user with the permission to answer deferred requests (an approver in each of their teams)."""
    user = user_model.objects.create_user(username, password=password)
    user.user_permissions.add(*Permission.objects.filter(codename="decide_deferred"))
    return user


def demo_profile() -> AgentProfile:
    """The profile the AG-UI endpoint tests post to, with every demo tool."""
    return shared_profile(PROFILE, tools=demo_tools())


def token_for(
    user: Any, name: str = "tests", scope: TokenScope = TokenScope.READ_DECIDE, team: Team | None = None
) -> str:
    token = ApiToken(user=user, name=name, scope=scope, team=team)
    secret = token.issue()
    token.save()
    return secret


def token_caller(user: Any) -> Caller:
    """An AG-UI caller authenticated by a new token of `user`, as the endpoint hands it to `sse_events`."""
    secret = token_for(user)
    return Caller(user, token=ApiToken.objects.get(digest=token_digest(secret)))
