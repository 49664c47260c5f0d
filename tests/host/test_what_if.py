"""What-if forks: a fork of a checkpoint that changes exactly one thing, runs as a normal execution, and runs nothing
with a side effect until an operator approves it; a change that does not validate writes nothing."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic_ai import ModelRequest, ToolReturnPart

from runs.demo_profile import ensure_demo_profile
from runs.models import (
    Checkpoint,
    CheckpointKind,
    DeferredRequest,
    Execution,
    HostPolicy,
    RunStatus,
    Thread,
    Verdict,
)
from runs.services.lifecycle import executions, what_if
from runs.services.lifecycle.approvals import Answer, pending_requests, submit_decisions
from runs.services.store import checkpoints
from runs.services.store.agents import WHAT_IF_REASON
from runs.services.store.policy import publish_policy_version
from runs.services.store.what_if import WhatIfRefused, applied_to_snapshot, parse_change
from tests.support import factories
from tests.support.bundles import drive

pytestmark = pytest.mark.django_db


def recorded(prompt: str) -> Execution:
    execution = executions.start_execution(executions.create_thread(ensure_demo_profile(), title="original"), prompt)
    drive(execution)
    execution.refresh_from_db()
    return execution


def decided(prompt: str, verdict: str, user: Any) -> Execution:
    """An execution that waited for the approval of `deploy_release` and got `verdict`."""
    execution = recorded(prompt)
    requests = pending_requests(execution)
    submit_decisions(
        execution,
        checkpoint_id=requests[0].checkpoint_id,
        key=f"decide-{execution.pk}",
        answers=[Answer(request.tool_call_id, verdict) for request in requests],
        user=user,
    )
    drive(execution)
    execution.refresh_from_db()
    assert execution.status == "completed", execution.failure_message
    return execution


def after_results(execution: Execution) -> Checkpoint:
    """The first checkpoint whose next step is a model request reading tool results."""
    for checkpoint in Checkpoint.objects.filter(run__execution=execution).order_by("pk"):
        last = checkpoints.load(checkpoint).message_history[-1]
        if isinstance(last, ModelRequest) and any(isinstance(part, ToolReturnPart) for part in last.parts):
            return checkpoint
    raise AssertionError("no checkpoint after a tool result")


def first_boundary(execution: Execution) -> Checkpoint:
    return Checkpoint.objects.filter(run__execution=execution, kind=CheckpointKind.BOUNDARY).earliest("pk")


def suspension(execution: Execution) -> DeferredRequest:
    return DeferredRequest.objects.filter(execution=execution).earliest("pk")


def fork(checkpoint: Checkpoint, **change: Any) -> Execution:
    forked = what_if.start_what_if(checkpoint, parse_change(change))
    drive(forked)
    forked.refresh_from_db()
    return forked


def output(execution: Execution) -> str:
    return str(execution.runs.latest("number").output)


@pytest.fixture
def operator(django_user_model):
    return django_user_model.objects.create_user("whatif-operator", password="pw-whatif-1")


@pytest.fixture
def approver(django_user_model):
    return factories.create_decider(django_user_model, "whatif-approver", "pw-whatif-2")


def test_a_changed_tool_result_is_what_the_model_reads_next():
    original = recorded("look up REC-7")
    checkpoint = after_results(original)
    call = next(
        part.tool_call_id
        for part in checkpoints.load(checkpoint).message_history[-1].parts
        if isinstance(part, ToolReturnPart) and part.tool_name == "lookup_record"
    )

    forked = fork(checkpoint, kind="tool_result", tool_call_id=call, result="REC-7: status=retired")

    assert forked.status == "completed", forked.failure_message
    assert "status=retired" in output(forked) and "status=retired" not in output(original)
    assert forked.what_if_of == original and forked.thread.forked_from == checkpoint
    assert what_if.describe(forked) == f"what-if of #{original.pk}: result of call {call} changed"
    # The original's thread and history are untouched.
    assert "status=active" in output(original)


def test_changed_instructions_and_model_are_what_the_fork_runs_with():
    original = recorded("hello there")
    checkpoint = first_boundary(original)

    instructed = fork(checkpoint, kind="instructions", instructions="Answer in one word.")
    remodelled = fork(checkpoint, kind="model", model="test")

    assert instructed.status == "completed", instructed.failure_message
    assert instructed.runs.get().profile_snapshot["instructions"] == "Answer in one word."
    assert remodelled.runs.get().profile_snapshot["model"] == "test"
    # pydantic-ai's TestModel calls every tool: those with side effects wait for an operator, the others ran.
    assert remodelled.status == "waiting"
    asked = {request.tool_name for request in DeferredRequest.objects.filter(execution=remodelled)}
    assert {"deploy_release", "slow_step"} <= asked and not asked & {"lookup_record", "search_records"}
    assert what_if.describe(remodelled) == f"what-if of #{original.pk}: model changed to test"


def test_another_policy_version_governs_the_fork():
    factories.configure_policy(redact_patterns=["api_key"])
    original = recorded("hello there")
    newer = publish_policy_version(HostPolicy.objects.get(), created_by=None, approval_timeout_seconds=600)
    earlier = original.policy_version

    forked = fork(first_boundary(original), kind="policy_version", number=newer.number)

    assert forked.policy_version == newer and forked.runs.get().policy_version == newer
    assert original.policy_version == earlier


def test_a_denial_instead_of_an_approval_reaches_the_model(approver):
    original = decided("deploy release 2.0", Verdict.APPROVED, approver)
    request = suspension(original)

    forked = fork(request.checkpoint, kind="approval", tool_call_id=request.tool_call_id, verdict="deny")

    assert forked.status == "completed", forked.failure_message
    assert "deploy_release (denied)" in output(forked)
    assert "deployed 2.0" in output(original) and "deployed" not in output(forked)


def test_an_approval_instead_of_a_denial_waits_for_an_operator_to_promote_the_fork(approver):
    original = decided("deploy release 2.0", Verdict.DENIED, approver)
    request = suspension(original)

    forked = fork(request.checkpoint, kind="approval", tool_call_id=request.tool_call_id, verdict="approve")

    # The approval is a side effect's go-ahead: the fork asks for it, and only an approver's answer runs it.
    assert forked.status == "waiting"
    (asked,) = pending_requests(forked)
    assert asked.tool_name == "deploy_release" and asked.args == {"version": "2.0"}
    promoted = decided_fork(forked, approver)
    assert "deployed 2.0" in output(promoted)


def decided_fork(forked: Execution, user: Any) -> Execution:
    requests = pending_requests(forked)
    submit_decisions(
        forked,
        checkpoint_id=requests[0].checkpoint_id,
        key=f"promote-{forked.pk}",
        answers=[Answer(request.tool_call_id, Verdict.APPROVED) for request in requests],
        user=user,
    )
    drive(forked)
    forked.refresh_from_db()
    assert forked.status == "completed", forked.failure_message
    return forked


def test_edited_arguments_are_asked_for_again_and_run_once_approved(approver):
    original = decided("deploy release 2.0", Verdict.APPROVED, approver)
    request = suspension(original)

    forked = fork(request.checkpoint, kind="arguments", tool_call_id=request.tool_call_id, args={"version": "9.9"})

    assert forked.status == "waiting"
    (asked,) = pending_requests(forked)
    assert asked.args == {"version": "9.9"}
    assert "deployed 9.9" in output(decided_fork(forked, approver))


def test_a_side_effect_the_policy_lets_run_waits_for_approval_in_a_what_if():
    original = recorded("slow 0.1")
    assert original.status == "completed", original.failure_message

    forked = fork(first_boundary(original), kind="instructions", instructions="Take your time.")

    assert forked.status == "waiting"
    (asked,) = pending_requests(forked)
    assert asked.tool_name == "slow_step" and asked.reason == WHAT_IF_REASON
    assert forked.runs.get().status == RunStatus.SUSPENDED


def counts() -> tuple[int, int, int]:
    return Thread.objects.count(), Execution.objects.count(), Checkpoint.objects.count()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"kind": "tool_result", "tool_call_id": "LOOKUP", "result": {"status": 1}}, "does not fit what lookup_record"),
        ({"kind": "tool_result", "tool_call_id": "no-such-call", "result": "x"}, "has no result at this checkpoint"),
        ({"kind": "model", "model": "nowhere:model-9"}, 'Unknown provider "nowhere"'),
        ({"kind": "model", "model": "gpt"}, "provider:model"),
        ({"kind": "policy_version", "number": 99}, "has no version 99"),
        ({"kind": "instructions", "instructions": "SAME"}, "nothing would change"),
        ({"kind": "arguments", "tool_call_id": "no-such-call", "args": {"version": "1"}}, "did not await approval"),
        ({"kind": "approval", "tool_call_id": "no-such-call", "verdict": "deny"}, "did not await approval"),
    ],
)
def test_a_change_that_does_not_validate_writes_nothing(change, message):
    original = recorded("look up REC-7")
    checkpoint = after_results(original)
    if change.get("tool_call_id") == "LOOKUP":
        change = {**change, "tool_call_id": lookup_call(checkpoint)}
    if change.get("instructions") == "SAME":
        change = {**change, "instructions": original.thread.profile.instructions}
    before = counts()

    with pytest.raises(WhatIfRefused, match=message):
        what_if.start_what_if(checkpoint, parse_change(change))

    assert counts() == before


def lookup_call(checkpoint: Checkpoint) -> str:
    return next(
        part.tool_call_id
        for part in checkpoints.load(checkpoint).message_history[-1].parts
        if isinstance(part, ToolReturnPart) and part.tool_name == "lookup_record"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [({"version": 5}, "version: Input should be a valid string"), ({"release": "2"}, "version: Field required")],
)
def test_edited_arguments_that_do_not_validate_against_the_tool_write_nothing(approver, args, message):
    request = suspension(decided("deploy release 2.0", Verdict.APPROVED, approver))
    before = counts()

    with pytest.raises(WhatIfRefused, match=message):
        what_if.start_what_if(
            request.checkpoint, parse_change({"kind": "arguments", "tool_call_id": request.tool_call_id, "args": args})
        )

    assert counts() == before


def test_the_same_verdict_again_is_no_change(approver):
    request = suspension(decided("deploy release 2.0", Verdict.APPROVED, approver))

    with pytest.raises(WhatIfRefused, match="approved already"):
        what_if.start_what_if(
            request.checkpoint,
            parse_change({"kind": "approval", "tool_call_id": request.tool_call_id, "verdict": "approve"}),
        )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"kind": "model", "model": "test", "instructions": "Be brief."}, "also changes: instructions"),
        ({"kind": "instructions", "instructions": "x", "number": 2, "args": {}}, "also changes: arguments, policy"),
        ({"kind": "everything"}, "Choose what the what-if changes"),
        ({"kind": "approval", "tool_call_id": "c", "verdict": "maybe"}, "verdict"),
        ({"kind": "policy_version", "number": 0}, "number"),
        ({"kind": "tool_result", "tool_call_id": "c", "result": float("nan")}, "not JSON"),
    ],
)
def test_a_second_change_or_a_malformed_one_is_refused(data, message):
    with pytest.raises(WhatIfRefused, match=message):
        parse_change(data)


LOCAL = {
    "name": "local",
    "model": "openai-chat:llama3.2",
    "base_url": "http://127.0.0.1:11434/v1",
    "instructions": "Hi",
}


@pytest.mark.parametrize(
    ("model", "base_url"),
    [("openai-chat:qwen3", LOCAL["base_url"]), ("anthropic:claude-sonnet-4-5", ""), ("test", "")],
)
def test_another_model_stays_on_the_profiles_server_only_where_its_provider_takes_one(model, base_url):
    snapshot = applied_to_snapshot(LOCAL, {"kind": "model", "model": model})

    assert snapshot == {**LOCAL, "model": model, "base_url": base_url}


def test_a_what_if_whose_original_was_purged_still_says_what_changed():
    original = recorded("hello there")
    forked = fork(first_boundary(original), kind="instructions", instructions="Be brief.")

    Execution.objects.filter(pk=original.pk).delete()
    forked.refresh_from_db()

    assert what_if.describe(forked) == "what-if of a purged execution: instructions changed"
