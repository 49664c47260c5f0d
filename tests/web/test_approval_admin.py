"""Django admin: policies are edited by publishing immutable versions; profiles pick tools from the registry."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from runs.models import AgentProfile, Execution, HostPolicy, HostPolicyVersion
from runs.services.lifecycle import create_thread, current_policy_version
from runs.services.store import POLICY_VERSION_FIELDS, toolbox
from tests.support.policy_admin import change_url, policy_form

pytestmark = pytest.mark.django_db


def test_editing_a_policy_publishes_a_new_version_and_running_work_keeps_its_own(admin_client, admin_user):
    first = current_policy_version()
    policy = first.policy
    profile = AgentProfile.objects.create(name="p", model="demo")
    execution = Execution.objects.create(thread=create_thread(profile), number=1, policy_version=first)
    rules = [{"tool": "lookup_record", "reason": "Records are private."}]

    response = admin_client.post(
        change_url(policy),
        policy_form(approval_rules=json.dumps(rules), approval_timeout_seconds="600", comment="gate lookups"),
    )

    assert response.status_code == 302
    policy.refresh_from_db()
    second = policy.current_version
    assert second.number == first.number + 1
    assert (second.approval_rules, second.approval_timeout_seconds) == (rules, 600)
    assert (second.created_by, second.comment) == (admin_user, "gate lookups")
    first.refresh_from_db()
    assert first.approval_rules == [] and first.approval_timeout_seconds == 0
    execution.refresh_from_db()
    assert execution.policy_version == first

    page = admin_client.get(change_url(policy)).content.decode()
    assert "gate lookups" in page and "approval_rules" in page and "Records are private." in page
    assert "Host tools: " + ", ".join(toolbox.tool_names()) in page


def test_invalid_rules_are_shown_as_form_errors_and_publish_nothing(admin_client):
    policy = current_policy_version().policy

    bad_op = admin_client.post(
        change_url(policy), policy_form(approval_rules='[{"tool": "x", "when": {"arg": "a", "op": "~"}}]')
    )
    bad_json = admin_client.post(change_url(policy), policy_form(approval_rules="[{tool: x}]"))
    bad_regex = admin_client.post(change_url(policy), policy_form(redact_patterns='["("]'))

    assert bad_op.status_code == bad_json.status_code == bad_regex.status_code == 200
    assert "Invalid approval rules" in bad_op.content.decode()
    assert "Invalid redaction pattern" in bad_regex.content.decode()
    assert HostPolicyVersion.objects.count() == 1


def test_saving_without_changes_publishes_nothing(admin_client):
    policy = current_policy_version().policy

    admin_client.post(change_url(policy), policy_form())

    assert HostPolicyVersion.objects.count() == 1


def test_a_new_policy_starts_at_version_one(admin_client, admin_user):
    admin_client.post(reverse("admin:runs_hostpolicy_add"), policy_form(name="strict", max_attempts="1"))

    version = HostPolicy.objects.get(name="strict").current_version
    assert (version.number, version.max_attempts, version.created_by) == (1, 1, admin_user)


def test_versions_cannot_be_added_edited_or_deleted(admin_client):
    version = current_policy_version()

    assert admin_client.get(reverse("admin:runs_hostpolicyversion_add")).status_code == 403
    assert admin_client.post(reverse("admin:runs_hostpolicyversion_delete", args=[version.pk])).status_code == 403
    admin_client.post(reverse("admin:runs_hostpolicyversion_change", args=[version.pk]), {"number": 99})
    version.refresh_from_db()
    assert version.number == 1


def test_admin_is_for_staff_only(client, django_user_model):
    user = django_user_model.objects.create_user("op", password="pw-op-12345")
    client.force_login(user)

    response = client.get(reverse("admin:runs_hostpolicy_changelist"))

    assert response.status_code == 302 and "/admin/login/" in response.url


def test_profiles_enable_tools_from_the_host_registry(admin_client):
    names = toolbox.tool_names()
    form = {"name": "ops", "model": "demo", "instructions": "Be careful.", "enabled_tools": names[:2]}

    page = admin_client.get(reverse("admin:runs_agentprofile_add")).content.decode()
    created = admin_client.post(reverse("admin:runs_agentprofile_add"), form)
    unknown = admin_client.post(
        reverse("admin:runs_agentprofile_add"), {**form, "name": "bad", "enabled_tools": ["rm_rf"]}
    )

    assert all(f'value="{name}"' in page for name in names)
    assert created.status_code == 302
    assert AgentProfile.objects.get(name="ops").enabled_tools == names[:2]
    assert unknown.status_code == 200 and not AgentProfile.objects.filter(name="bad").exists()


def test_the_change_form_offers_every_field_of_a_policy_version(admin_client):
    page = admin_client.get(change_url(current_policy_version().policy)).content.decode()
    for name in POLICY_VERSION_FIELDS:
        # The field itself, or its rows (`<name>-rows`, `<name>-0-...`).
        assert f'name="{name}' in page, f"{name} is not on the form, so saving it would always fail"
