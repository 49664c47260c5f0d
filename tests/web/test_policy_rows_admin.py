"""The policy admin in the app's look: approval rules and redaction patterns edited as rows (errors beside the row,
nothing saved), the stored JSON shown read-only, the dry run's changes first, and a re-mask started from the page."""

from __future__ import annotations

import re

import pytest
from django.contrib.admin.models import LogEntry
from django.urls import reverse

from runs.models import HostPolicy, HostPolicyVersion, Remask
from runs.services.lifecycle import executions, remasking
from runs.services.store import publish_policy_version
from runs.services.worker import runner
from tests.support import factories
from tests.support.policy_admin import change_url, policy_form

pytestmark = pytest.mark.django_db

DEMO_TOOLS = ["lookup_record", "search_records", "deploy_release", "ask_operator", "slow_step"]


def default_policy() -> HostPolicy:
    return executions.current_policy_version().policy


def rows(name: str, *items: dict[str, str]) -> dict[str, str]:
    """The post of a rows editor: each item's cells under `<name>-<row>-<column>`, and the row count."""
    posted = {f"{name}-rows": str(len(items))}
    for index, cells in enumerate(items):
        posted |= {f"{name}-{index}-{column}": value for column, value in cells.items()}
    return posted


def row_form(*, rules=(), patterns=(), **fields: str) -> dict[str, str]:
    form = policy_form(**fields)
    del form["approval_rules"], form["redact_patterns"]
    return form | rows("approval_rules", *rules) | rows("redact_patterns", *patterns)


def row_errors(page: str, name: str) -> dict[int, str]:
    """Row number → the error text shown in that row."""
    found = {}
    for match in re.finditer(r'<tr class="form-row-item row-invalid" data-row="(\d+)">(.*?)</tr>', page, re.S):
        if f'name="{name}-{match[1]}-' in match[2]:
            found[int(match[1])] = " ".join(re.findall(r"<li>(.*?)</li>", match[2], re.S))
    return found


def test_rules_and_patterns_posted_as_rows_are_stored_as_the_same_json(admin_client):
    policy = default_policy()
    rules = (
        {"tool": "lookup_record", "reason": "Records are private."},
        {"tool": "", "arg": "", "op": "", "value": "", "reason": ""},  # the blank row is dropped
        {"tool": "slow_step", "arg": "seconds", "op": "gt", "value": "10", "reason": "long waits"},
        {"tool": "search_records", "arg": "query", "op": "contains", "value": "REC-7"},
        {"tool": "deploy_release", "remove": "on"},
    )

    response = admin_client.post(change_url(policy), row_form(rules=rules, patterns=[{"pattern": "api_?key"}]))

    assert response.status_code == 302, response.content.decode()[:2000]
    policy.refresh_from_db()
    assert policy.current_version.approval_rules == [
        {"tool": "lookup_record", "reason": "Records are private."},
        {"tool": "slow_step", "when": {"arg": "seconds", "op": "gt", "value": 10}, "reason": "long waits"},
        {"tool": "search_records", "when": {"arg": "query", "op": "contains", "value": "REC-7"}},
    ]
    assert policy.current_version.redact_patterns == ["api_?key"]


def test_the_change_page_shows_each_rule_as_a_row_and_the_json_read_only(admin_client):
    factories.configure_policy(
        approval_rules=[{"tool": "deploy_release", "when": {"arg": "version", "op": "eq", "value": "1.4"}}],
        redact_patterns=["token"],
    )

    page = admin_client.get(change_url(default_policy())).content.decode()

    assert 'name="approval_rules-0-tool" value="deploy_release"' in page
    assert 'name="approval_rules-0-value" value="&quot;1.4&quot;"' in page  # a string that reads as JSON stays one
    assert '<option value="eq" selected>' in page
    assert 'name="redact_patterns-0-pattern" value="token"' in page
    assert 'name="approval_rules-1-tool" value=""' in page  # one blank row to add to
    assert 'name="approval_rules-rows" value="2"' in page
    assert 'for="id_approval_rules-0-tool"' in page and 'id="id_approval_rules-0-tool"' in page
    assert "As JSON (read-only)" in page and "<textarea" not in page.split('id="approval_rules-rows"')[1][:3000]


@pytest.mark.parametrize(
    ("rules", "patterns", "field", "row", "expected"),
    [
        ([{"tool": "lookup_record"}, {"tool": "lookup_recrod"}], [], "approval_rules", 1, "did you mean lookup_record"),
        ([{"tool": "slow_step", "arg": "seconds", "op": "gt", "value": "ten"}], [], "approval_rules", 0, "number"),
        ([{"tool": "lookup_record", "arg": "record_id"}], [], "approval_rules", 0, "Invalid approval rules"),
        ([], [{"pattern": "token"}, {"pattern": "("}], "redact_patterns", 1, "Invalid redaction pattern"),
    ],
    ids=["unknown-tool", "value-of-wrong-type", "condition-without-operator", "bad-regex"],
)
def test_a_bad_row_gets_its_error_beside_it_and_nothing_is_saved(admin_client, rules, patterns, field, row, expected):
    response = admin_client.post(change_url(default_policy()), row_form(rules=rules, patterns=patterns))

    assert response.status_code == 200
    page = response.content.decode()
    errors = row_errors(page, field)
    assert list(errors) == [row] and expected in errors[row], errors
    assert HostPolicyVersion.objects.count() == 1
    # The rows come back as typed, the bad one among them.
    for index, cells in enumerate(rules or patterns):
        for column, value in cells.items():
            if column != "op":
                assert f'name="{field}-{index}-{column}" value="{value}"' in page


def run_demo(text: str) -> str:
    thread = factories.thread(model="demo", tools=DEMO_TOOLS)
    execution = executions.start_execution(thread, text)
    return runner.execute_run(execution.runs.get().pk)


def test_the_dry_run_lists_the_changes_first_and_the_unchanged_calls_behind_a_disclosure(admin_client):
    assert run_demo("look up REC-42") == "completed"
    form = row_form(rules=[{"tool": "lookup_record"}], dry_run_last="5", _dryrun="Dry run")

    response = admin_client.post(change_url(default_policy()), form)

    page = response.content.decode()
    changes, unchanged = page.split('id="dry-run-changes"')[1].split('<details id="dry-run-unchanged">')
    assert re.findall(r'data-tool="(\w+)"', changes) == ["lookup_record"]
    assert "newly stopped" in changes
    assert "<summary>1 unchanged call</summary>" in unchanged
    assert re.findall(r'data-tool="(\w+)"', unchanged.split("</details>")[0]) == ["search_records"]


def test_a_dry_run_changing_nothing_says_so(admin_client):
    run_demo("look up REC-42")

    page = admin_client.post(change_url(default_policy()), row_form(_dryrun="Dry run")).content.decode()

    assert 'id="dry-run-no-changes"' in page and "No call would be decided differently." in page


def test_the_redaction_help_says_what_a_pattern_applies_to(admin_client):
    page = " ".join(admin_client.get(change_url(default_policy())).content.decode().split())

    assert "applies to executions that start afterwards" in page
    assert "keeps the patterns of the policy version it started with" in page
    assert "The journal, checkpoints and decisions keep the real values" in page
    assert "on every page" not in page


def test_the_page_starts_a_remask_audits_who_did_and_shows_its_progress(admin_client, admin_user):
    execution = factories.make_execution(status="completed", input="api_key=sk-1 go")
    policy = execution.policy_version.policy
    publish_policy_version(policy, created_by=None, comment="test", redact_patterns=["api_key"])

    response = admin_client.post(reverse("admin:runs_hostpolicy_remask", args=[policy.pk]), row_form())

    assert response.status_code == 302 and response["Location"].endswith("#remask")
    remask = Remask.objects.get()
    assert (remask.started_by, remask.total, remask.done) == (admin_user, 1, 0)
    entry = LogEntry.objects.get(object_id=str(policy.pk))
    assert (entry.user, entry.change_message) == (
        admin_user,
        f"Started re-masking 1 existing executions (#{remask.pk}).",
    )
    page = admin_client.get(change_url(policy)).content.decode()
    assert 'id="remask-status"' in page and "started by admin" in page
    progress_url = reverse("admin:runs_hostpolicy_remask_progress", args=[remask.pk])
    assert admin_client.get(progress_url).json() == {"done": 0, "total": 1, "finished": False, "changed_events": 0}

    remasking.run(remask.pk)

    assert admin_client.get(progress_url).json()["finished"] is True
    execution.refresh_from_db()
    assert execution.shown_input == "api_key=[redacted] go"


def test_a_remask_is_a_post_of_someone_who_may_change_the_policy(client, admin_client, django_user_model):
    policy = default_policy()
    publish_policy_version(policy, created_by=None, comment="test", redact_patterns=["api_key"])
    url = reverse("admin:runs_hostpolicy_remask", args=[policy.pk])
    viewer = django_user_model.objects.create_user("viewer", password="pw-viewer-123", is_staff=True)
    client.force_login(viewer)

    assert admin_client.get(url).status_code == 405
    assert client.post(url).status_code == 404  # outside the viewer's teams
    assert not Remask.objects.exists()


def test_a_post_naming_more_rows_than_are_read_is_refused_and_saves_nothing(admin_client):
    form = row_form(rules=[{"tool": "lookup_record"}]) | {"approval_rules-rows": "100000"}

    response = admin_client.post(change_url(default_policy()), form)

    assert response.status_code == 200
    assert "At most 200 rows are read; this post names 100000. Nothing was saved." in response.content.decode()
    assert HostPolicyVersion.objects.count() == 1


def test_a_remask_without_patterns_is_refused_with_a_message(admin_client):
    response = admin_client.post(reverse("admin:runs_hostpolicy_remask", args=[default_policy().pk]), follow=True)

    assert "Nothing was started: The policy has no redaction patterns to apply." in response.content.decode()
    assert not Remask.objects.exists()


def test_the_admin_wears_the_apps_look(admin_client):
    page = admin_client.get(reverse("admin:index")).content.decode()

    assert "css/palette.css" in page and "css/admin_theme.css" in page
    assert '<a class="brand" href="/">Harness Host</a>' in page
    assert "Django administration" not in page
