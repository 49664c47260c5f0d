"""Admin that prevents mistakes: rules checked against the tool registry, bounded numbers, effective approvals,
and a dry run of new rules against the tool calls of recent executions."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Permission
from django.contrib.messages import get_messages
from django.db import IntegrityError, transaction
from django.urls import reverse

from runs.models import POLICY_VERSION_LIMITS, HostPolicy, HostPolicyVersion
from runs.services.lifecycle import executions
from runs.services.store import approval_reason, publish_policy_version
from runs.services.worker import runner
from tests.support import factories
from tests.support.policy_admin import change_url, policy_form

pytestmark = pytest.mark.django_db

NaN = float("nan")
DEMO_TOOLS = ["lookup_record", "search_records", "deploy_release", "ask_operator", "slow_step"]


def post_rules(client, policy: HostPolicy, rules, **fields):
    text = rules if isinstance(rules, str) else json.dumps(rules)
    return client.post(change_url(policy), policy_form(approval_rules=text, **fields))


def form_errors(response) -> list[str]:
    """The messages of every field error of the admin form (the page was re-rendered, nothing saved)."""
    assert response.status_code == 200, response.status_code
    form = response.context["adminform"].form
    return [message for errors in form.errors.values() for message in errors]


def default_policy() -> HostPolicy:
    return executions.current_policy_version().policy


@pytest.mark.parametrize(
    ("rules", "expected"),
    [
        ([{"tool": "lookup_recrod"}], "no host tool is called “lookup_recrod” (did you mean lookup_record?)"),
        ([{"tool": "delete_*"}], "the pattern “delete_*” matches no host tool"),
        (
            [{"tool": "deploy_release", "when": {"arg": "versoin", "op": "eq", "value": "1.4.3"}}],
            "deploy_release has no argument “versoin” (its arguments: version)",
        ),
        (
            [{"tool": "*_records", "when": {"arg": "record_id", "op": "eq", "value": "REC-1"}}],
            "search_records has no argument “record_id”",
        ),
        (
            [{"tool": "slow_step", "when": {"arg": "seconds", "op": "gt", "value": "10"}}],
            'slow_step.seconds: the value "10" is not of the argument\'s type (number)',
        ),
        (
            [{"tool": "slow_step", "when": {"arg": "seconds", "op": "contains", "value": 1}}],
            "slow_step.seconds: “contains” needs a text or list argument",
        ),
        ([{"tool": "slow_step", "when": {"arg": "seconds", "op": "gt", "value": NaN}}], "numbers must be finite"),
        ('[{"tool": "slow_step", "when": {"arg": "seconds", "op": "gt", "value": NaN}}]', "numbers must be finite"),
        ('[{"tool": "slow_step", "when": {"arg": "seconds", "op": "lt", "value": 1e999}}]', "numbers must be finite"),
        ("[{tool: lookup_record}]", "Enter a valid JSON."),
        ('[{"tool": "lookup_record", "when": {"arg": "record_id", "op": "~"}}]', "Invalid approval rules"),
    ],
    ids=[
        "unknown-tool",
        "glob-matching-nothing",
        "unknown-argument",
        "argument-missing-in-a-matched-tool",
        "value-of-wrong-type",
        "contains-on-a-number",
        "nan-value",
        "nan-literal",
        "infinite-literal",
        "not-json",
        "unknown-operator",
    ],
)
def test_each_rule_mistake_is_a_form_error_and_publishes_nothing(admin_client, rules, expected):
    policy = default_policy()

    errors = form_errors(post_rules(admin_client, policy, rules))

    assert any(expected in error for error in errors), errors
    assert HostPolicyVersion.objects.count() == 1


@pytest.mark.parametrize(
    ("patterns", "expected"),
    [
        ("password, token", "Enter a valid JSON."),
        ("NaN", "must be a list of non-empty regular expressions"),
        ('["token", 1]', "must be a list of non-empty regular expressions"),
        ('["("]', "Invalid redaction pattern"),
    ],
)
def test_redaction_patterns_that_are_not_a_json_list_of_regexes_are_form_errors(admin_client, patterns, expected):
    response = admin_client.post(change_url(default_policy()), policy_form(redact_patterns=patterns))

    assert any(expected in error for error in form_errors(response))
    assert HostPolicyVersion.objects.count() == 1


def test_every_mistake_of_several_rules_is_listed(admin_client):
    rules = [{"tool": "lookup_recrod"}, {"tool": "lookup_record"}, {"tool": "nothing_here"}]

    errors = form_errors(post_rules(admin_client, default_policy(), rules))

    assert [error.split(":")[0] for error in errors] == ["rule 1 (lookup_recrod)", "rule 3 (nothing_here)"]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("lease_seconds", str(10**15)),
        ("lease_seconds", "4"),
        ("max_attempts", "0"),
        ("max_attempts", "21"),
        ("approval_timeout_seconds", "-1"),
        ("approval_timeout_seconds", str(10**15)),
        ("lease_seconds", "1e999"),
        ("dry_run_last", "100000"),
    ],
)
def test_numbers_out_of_range_are_form_errors(admin_client, field, value):
    response = admin_client.post(change_url(default_policy()), policy_form(**{field: value}))

    assert form_errors(response) and field in response.context["adminform"].form.errors
    assert HostPolicyVersion.objects.count() == 1


def test_the_database_refuses_numbers_out_of_range_whoever_writes_them():
    current = executions.current_policy_version()

    with pytest.raises(ValueError, match="lease_seconds must be a whole number from 1 to 3600"):
        publish_policy_version(current.policy, created_by=None, lease_seconds=10**15)
    for name, (low, high) in POLICY_VERSION_LIMITS.items():
        for value in (low - 1, high + 1):
            with pytest.raises(IntegrityError), transaction.atomic():
                HostPolicyVersion.objects.filter(pk=current.pk).update(**{name: value})

    current.refresh_from_db()
    assert (current.lease_seconds, current.max_attempts, current.approval_timeout_seconds) == (30, 3, 0)


def test_the_change_form_shows_what_asks_for_approval_including_the_tools_own_declaration(admin_client):
    page = admin_client.get(change_url(default_policy()))

    effective = {tool.tool: tool for tool in page.context["effective_approvals"]}
    [own] = effective["deploy_release"].requirements
    assert (own.source, own.calls, own.reason) == ("the tool itself", "every call", approval_reason(None, "x", {}))
    assert effective["lookup_record"].requirements == ()
    assert "What asks for approval" in page.content.decode()


def test_saving_says_which_tools_now_ask_for_approval(admin_client):
    rules = [
        {"tool": "lookup_record", "reason": "Records are private."},
        {"tool": "slow_step", "when": {"arg": "seconds", "op": "gt", "value": 60}},
    ]

    response = post_rules(admin_client, default_policy(), rules)

    assert response.status_code == 302
    [message] = [str(m) for m in get_messages(response.wsgi_request) if str(m).startswith("Approval is required")]
    assert "deploy_release (every call, by the tool itself)" in message
    assert "lookup_record (every call, by rule 1)" in message
    assert "slow_step (calls where seconds gt 60, by rule 2)" in message
    assert "search_records" not in message
    page = admin_client.get(change_url(default_policy())).content.decode()
    assert "Records are private." in page and "calls where seconds gt 60" in page
    # The version history shows the change as JSON, as it was typed, not as a Python repr.
    assert "<code>approval_rules</code>: [] → [{&quot;tool&quot;: &quot;lookup_record&quot;" in page


# -- dry run ---------------------------------------------------------------------------------------------------


def run_demo(text: str) -> str:
    """One demo execution carried out in this process (no RQ): its calls land in the journal."""
    thread = factories.thread(model="demo", tools=DEMO_TOOLS)
    execution = executions.start_execution(thread, text)
    return runner.execute_run(execution.runs.get().pk)


def dry_run(client, policy: HostPolicy, rules, *, last: int = 20, **fields):
    form = policy_form(approval_rules=json.dumps(rules), dry_run_last=str(last), _dryrun="Dry run", **fields)
    return client.post(change_url(policy), form)


def calls_of(response) -> dict[str, tuple[bool, bool, str]]:
    """tool → (asked then, would stop now, change), from the dry run the page shows."""
    assert response.status_code == 200
    result = response.context["dry_run"]
    return {call.tool: (call.asked_then, call.stopped_now, call.change) for call in result.calls}


def test_a_dry_run_shows_which_recent_calls_new_rules_would_stop_and_saves_nothing(admin_client):
    assert run_demo("look up REC-42") == "completed"
    assert run_demo("deploy it") == "suspended"
    policy = default_policy()
    rules = [
        {"tool": "lookup_record", "reason": "Records are private."},
        {"tool": "search_records", "when": {"arg": "query", "op": "contains", "value": "REC-7"}},
    ]

    response = dry_run(admin_client, policy, rules, comment="would this hurt?")

    assert calls_of(response) == {
        "lookup_record": (False, True, "newly stopped"),
        "search_records": (False, False, ""),
        "deploy_release": (True, True, ""),
    }
    page = " ".join(response.content.decode().split())
    assert "2 of 3 tool calls in the last 2 executions would be stopped" in page
    assert "rule 1: Records are private." in page and "the tool itself" in page
    assert "would this hurt?" in page  # the form keeps what was typed
    assert HostPolicyVersion.objects.count() == 1
    policy.refresh_from_db()
    assert policy.current_version.approval_rules == []


def test_a_dry_run_reports_calls_the_new_rules_would_no_longer_stop(admin_client):
    factories.configure_policy(approval_rules=[{"tool": "lookup_record"}])
    assert run_demo("look up REC-42") == "suspended"

    response = dry_run(admin_client, default_policy(), [])

    assert calls_of(response)["lookup_record"] == (True, False, "no longer stopped")


def test_a_dry_run_reads_only_the_newest_executions(admin_client):
    run_demo("deploy it")
    run_demo("look up REC-42")

    response = dry_run(admin_client, default_policy(), [], last=1)

    assert response.context["dry_run"].executions == 1
    assert set(calls_of(response)) == {"lookup_record", "search_records"}


def test_a_dry_run_judges_real_arguments_but_shows_them_redacted(admin_client):
    factories.configure_policy(redact_patterns=["record_id"])
    run_demo("look up REC-42")
    rules = [{"tool": "lookup_record", "when": {"arg": "record_id", "op": "eq", "value": "REC-42"}}]

    response = dry_run(admin_client, default_policy(), rules, redact_patterns='["record_id"]')

    assert calls_of(response)["lookup_record"] == (False, True, "newly stopped")
    lookup = next(call for call in response.context["dry_run"].calls if call.tool == "lookup_record")
    assert lookup.args == {"record_id": "[redacted]"}
    page = response.content.decode()
    assert "{&quot;record_id&quot;: &quot;[redacted]&quot;}" in page
    assert "record_id&quot;: &quot;REC-42" not in page


def test_a_dry_run_of_mistaken_rules_shows_the_errors_instead(admin_client):
    run_demo("look up REC-42")

    response = dry_run(admin_client, default_policy(), [{"tool": "lookup_recrod"}])

    assert any("lookup_recrod" in error for error in form_errors(response))
    assert "dry_run" not in response.context
    assert HostPolicyVersion.objects.count() == 1


def test_profiles_refuse_tools_the_registry_does_not_have(admin_client):
    response = admin_client.post(
        reverse("admin:runs_agentprofile_add"), {"name": "bad", "model": "demo", "enabled_tools": ["lookup_recrod"]}
    )

    assert any("lookup_recrod" in error for error in form_errors(response))


def test_a_new_policy_can_be_dry_run_before_it_exists(admin_client):
    run_demo("look up REC-42")
    form = policy_form(name="strict", approval_rules='[{"tool": "*_record*"}]', dry_run_last="5", _dryrun="Dry run")

    response = admin_client.post(reverse("admin:runs_hostpolicy_add"), form)

    assert calls_of(response) == {
        "lookup_record": (False, True, "newly stopped"),
        "search_records": (False, True, "newly stopped"),
    }
    assert not HostPolicy.objects.filter(name="strict").exists()


def test_staff_who_are_not_admins_of_the_policys_team_get_no_dry_run(client, django_user_model):
    # A global model permission does not reach into a team: in the admin, only the team's admin role does.
    viewer = django_user_model.objects.create_user("viewer", password="pw-viewer-123", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_hostpolicy"))
    client.force_login(viewer)
    policy = default_policy()

    version = policy.current_version_id
    page = client.get(change_url(policy))
    posted = client.post(change_url(policy), policy_form(_dryrun="Dry run", max_attempts="1"))

    # The admin's answer for a row it does not find: back to the index; a post is refused.
    assert (page.status_code, page.url, posted.status_code) == (302, reverse("admin:index"), 403)
    policy.refresh_from_db()
    assert policy.current_version_id == version
