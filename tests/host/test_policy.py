"""Host policy: approval rules as an agent capability, reasons, expiry, redaction patterns and immutable versions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from pydantic_ai import (
    Agent,
    DeferredToolRequests,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolApproved,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import FunctionModel

from runs.harness import ApprovalRule, ArgumentCondition, parse_approval_rules, prepare_tool_recovery
from runs.models import HostPolicy, HostPolicyVersion
from runs.services.store import (
    approval_capability,
    approval_reason,
    expiry_for,
    parse_redact_patterns,
    publish_policy_version,
)


def version(**fields):
    """An unsaved stand-in with the fields of a HostPolicyVersion that the policy functions read."""
    defaults = {"approval_rules": [], "approval_timeout_seconds": 0, "redact_patterns": []}
    return SimpleNamespace(**{**defaults, **fields})


def script(messages, info):
    returns = [part for part in messages[-1].parts if isinstance(part, ToolReturnPart)]
    if returns:
        return ModelResponse(parts=[TextPart(" | ".join(f"{p.tool_name}:{p.content}" for p in returns))])
    return ModelResponse(
        parts=[
            ToolCallPart("delete_file", {"path": "/tmp/a"}, tool_call_id="c-del"),
            ToolCallPart("transfer", {"amount": 5000}, tool_call_id="c-big"),
            ToolCallPart("transfer", {"amount": 5}, tool_call_id="c-small"),
            ToolCallPart("read_file", {"path": "/etc/motd"}, tool_call_id="c-read"),
        ]
    )


def agent_under(policy_version) -> Agent:
    agent = Agent(
        FunctionModel(script),
        output_type=[str, DeferredToolRequests],
        capabilities=[approval_capability(policy_version)],
    )

    @agent.tool_plain
    def delete_file(path: str) -> str:
        return f"deleted {path}"

    @agent.tool_plain
    def transfer(amount: int) -> str:
        return f"sent {amount}"

    @agent.tool_plain
    def read_file(path: str) -> str:
        return f"read {path}"

    return agent


RULES = [
    {"tool": "delete_*", "reason": "Deleting needs a human."},
    {"tool": "transfer", "when": {"arg": "amount", "op": "gt", "value": 1000}, "reason": "Large transfer."},
]


async def test_rules_make_matching_calls_approval_required_and_leave_others_alone():
    result = await agent_under(version(approval_rules=RULES)).run("go")

    requests = result.output
    assert isinstance(requests, DeferredToolRequests)
    assert sorted(call.tool_call_id for call in requests.approvals) == ["c-big", "c-del"]
    assert requests.calls == []


async def test_without_rules_nothing_suspends():
    result = await agent_under(version()).run("go")

    assert result.output == (
        "delete_file:deleted /tmp/a | transfer:sent 5000 | transfer:sent 5 | read_file:read /etc/motd"
    )


async def test_an_approved_call_runs_once_with_the_approved_arguments():
    agent = agent_under(version(approval_rules=RULES))
    first = await agent.run("go")
    results = first.output.build_results(
        approvals={"c-del": ToolApproved(override_args={"path": "/tmp/b"}), "c-big": ToolApproved()}
    )

    second = await agent.run(message_history=first.all_messages(), deferred_tool_results=results)

    assert "delete_file:deleted /tmp/b" in second.output
    assert "transfer:sent 5000" in second.output


async def test_an_approval_with_edited_arguments_is_not_asked_again_by_the_condition():
    agent = agent_under(version(approval_rules=RULES))
    first = await agent.run("go")
    results = first.output.build_results(
        approvals={"c-del": False, "c-big": ToolApproved(override_args={"amount": 99999})}
    )

    second = await agent.run(message_history=first.all_messages(), deferred_tool_results=results)

    assert isinstance(second.output, str)
    assert "transfer:sent 99999" in second.output


@pytest.mark.parametrize(
    ("op", "value", "args", "expected"),
    [
        ("eq", "prod", {"env": "prod"}, True),
        ("eq", "prod", {"env": "dev"}, False),
        ("ne", "dev", {"env": "prod"}, True),
        ("ne", "dev", {"env": "dev"}, False),
        ("gt", 10, {"env": 11}, True),
        ("gt", 10, {"env": 10}, False),
        ("lt", 10, {"env": 3}, True),
        ("lt", 10, {"env": 30}, False),
        ("contains", "rm", {"env": "sudo rm -rf"}, True),
        ("contains", "rm", {"env": "ls"}, False),
        # Fail closed: what cannot be judged asks for approval.
        ("gt", 10, {}, True),
        ("gt", 10, {"env": "many"}, True),
        ("contains", "x", {"env": 5}, True),
    ],
)
def test_argument_conditions(op, value, args, expected):
    assert ArgumentCondition(arg="env", op=op, value=value).holds(args) is expected


def test_rule_globs_match_whole_names():
    rule = ApprovalRule(tool="db_*")
    assert rule.matches_tool("db_drop")
    assert not rule.matches_tool("read_db_x")


def test_invalid_rules_are_refused_with_the_place_of_the_problem():
    with pytest.raises(ValueError, match=r"0\.when\.op"):
        parse_approval_rules([{"tool": "x", "when": {"arg": "a", "op": "between", "value": 1}}])
    with pytest.raises(ValueError, match=r"1\.tool"):
        parse_approval_rules([{"tool": "x"}, {"reason": "no tool"}])
    with pytest.raises(ValueError, match=r"0\.colour: Extra inputs"):
        parse_approval_rules([{"tool": "x", "colour": "red"}])
    assert parse_approval_rules(None) == ()


def test_reason_is_the_matched_rule_or_a_fallback():
    rules = version(approval_rules=RULES)
    assert approval_reason(rules, "delete_file", {"path": "/"}) == "Deleting needs a human."
    assert approval_reason(rules, "transfer", {"amount": 2000}) == "Large transfer."
    assert approval_reason(rules, "ask_user", {}) == "The tool itself asks for approval."
    assert approval_reason(version(approval_rules=[{"tool": "x"}]), "x", {}).startswith("Host policy")


def test_expiry_follows_the_policy_timeout():
    created = datetime(2026, 1, 1, tzinfo=UTC)
    assert expiry_for(version(approval_timeout_seconds=90), created) == created + timedelta(seconds=90)
    assert expiry_for(version(approval_timeout_seconds=0), created) is None
    assert expiry_for(None, created) is None


def test_redaction_patterns_must_be_valid_regexes():
    assert parse_redact_patterns(["secret"])[0].search("MY_SECRET")
    with pytest.raises(ValueError, match="Invalid redaction pattern"):
        parse_redact_patterns(["("])


@pytest.mark.django_db
def test_publishing_a_policy_version_keeps_older_versions_and_carries_fields_over(django_user_model):
    admin = django_user_model.objects.create_user("root")
    policy = HostPolicy.objects.create(name="default")
    first = publish_policy_version(policy, created_by=None, approval_rules=[], max_attempts=5)

    second = publish_policy_version(policy, created_by=admin, comment="gate deletes", approval_rules=RULES[:1])

    first.refresh_from_db()
    policy.refresh_from_db()
    assert (first.number, second.number) == (1, 2)
    assert policy.current_version == second
    assert first.approval_rules == [] and second.approval_rules == RULES[:1]
    assert second.max_attempts == 5
    assert (second.created_by, second.comment) == (admin, "gate deletes")
    assert HostPolicyVersion.objects.filter(policy=policy).count() == 2


@pytest.mark.django_db
def test_publishing_refuses_invalid_rules_without_writing():
    policy = HostPolicy.objects.create(name="default")

    with pytest.raises(ValueError):
        publish_policy_version(policy, created_by=None, approval_rules=[{"tool": ""}])

    assert not HostPolicyVersion.objects.exists()


async def test_a_recovery_replay_of_a_conditionally_gated_call_asks_for_approval_again() -> None:
    """Recovery replays carry pydantic-ai's `ToolApproved` as replay permission, which is not an approval.

    The engine's recovery plan beside the Host's approval capability in a plain pydantic-ai Agent, without a worker
    that dies mid-call."""
    history: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("go")]),
        ModelResponse(parts=[ToolCallPart("transfer", {"amount": 5000}, tool_call_id="c-big")]),
    ]
    plan = prepare_tool_recovery(history, "always")
    agent = Agent(
        FunctionModel(script),
        output_type=[str, DeferredToolRequests],
        capabilities=[plan.capability(), approval_capability(version(approval_rules=RULES))],
    )

    @agent.tool_plain
    def transfer(amount: int) -> str:
        return f"sent {amount}"

    result = await agent.run(message_history=plan.history, deferred_tool_results=plan.deferred_tool_results)

    assert isinstance(result.output, DeferredToolRequests)
    assert [call.tool_call_id for call in result.output.approvals] == ["c-big"]
