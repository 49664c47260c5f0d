"""Approvals in real Chromium against daphne, the RQ worker and Redis: decide, resume live, stale tabs, admin."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from runs.models import (
    Decision,
    DecisionSubmission,
    DeferredRequest,
    ExecutionStatus,
    Thread,
    ToolDispatch,
    Verdict,
)
from runs.services.lifecycle import executions
from tests.support import factories
from tests.support.approval_pages import TOOLS, row, suspend_on_records, wait_for_status
from tests.support.browser import log_in


@pytest.fixture
def demo_thread() -> Thread:
    return factories.thread(model="demo", tools=TOOLS)


def test_an_operator_edits_one_call_denies_another_and_the_execution_resumes_live(
    live_stack, operator_user, page, demo_thread
):
    execution = suspend_on_records(demo_thread)
    log_in(page, live_stack.base_url, "op", "op-password-1")
    url = f"{live_stack.base_url}/executions/{execution.pk}/"
    page.goto(url)
    page.wait_for_selector('#connection[data-state="live"]', timeout=60_000)
    second_tab = page.context.new_page()
    second_tab.goto(url)

    lookup, search = row(page, "lookup_record"), row(page, "search_records")
    expect(lookup.locator(".reason")).to_contain_text("Records are private.")
    lookup.locator("input[value=edit]").check()
    lookup.locator("textarea").fill(json.dumps({"record_id": 7}))
    search.locator("input[value=deny]").check()
    search.locator("input[type=text]").fill("No searching today.")
    page.click("button.submit-decisions")
    # The browser checks the tool's JSON schema before anything is sent.
    expect(lookup.locator(".row-error")).to_contain_text("record_id: expected string")
    assert not DecisionSubmission.objects.exists()

    lookup.locator("textarea").fill(json.dumps({"record_id": "REC-7"}))
    page.dblclick("button.submit-decisions")

    expect(page.locator(".approval-done")).to_be_visible(timeout=60_000)
    expect(page.locator("#execution-status")).to_have_text("completed", timeout=60_000)
    expect(page.locator(".lane-head")).to_have_count(2)
    assert page.url == url, "the page was never reloaded"
    assert DecisionSubmission.objects.count() == 1
    decisions = {d.request.tool_name: d for d in Decision.objects.select_related("request", "decided_by")}
    assert decisions["lookup_record"].approved_args == {"record_id": "REC-7"}
    assert decisions["lookup_record"].decided_by == operator_user
    assert (decisions["search_records"].verdict, decisions["search_records"].message) == (
        Verdict.DENIED,
        "No searching today.",
    )
    assert list(ToolDispatch.objects.values_list("tool_name", "args")) == [("lookup_record", {"record_id": "REC-7"})]

    # The other tab's form closed by itself: nothing stale is left to submit.
    expect(second_tab.locator("#approval-form")).to_have_count(0, timeout=60_000)
    expect(second_tab.locator(".approval-closed")).to_contain_text("Answered by op")
    assert DecisionSubmission.objects.count() == 1


def test_a_user_without_the_permission_sees_the_requests_but_cannot_submit(
    live_stack, django_user_model, page, demo_thread
):
    django_user_model.objects.create_user("watcher", password="watcher-password-1")
    execution = suspend_on_records(demo_thread)
    log_in(page, live_stack.base_url, "watcher", "watcher-password-1")
    page.goto(f"{live_stack.base_url}/executions/{execution.pk}/")

    expect(page.locator(".approval-set")).to_contain_text("Read-only")
    expect(page.locator("#approval-form")).to_have_count(0)
    status = page.evaluate(
        """async (url) => {
            const token = document.cookie.split('; ').find((c) => c.startsWith('csrftoken=')).split('=')[1];
            const body = new FormData();
            body.append('csrfmiddlewaretoken', token);
            body.append('checkpoint', '1');
            body.append('submission_key', 'forged');
            const response = await fetch(url, {method: 'POST', body, credentials: 'same-origin'});
            return response.status;
        }""",
        f"{live_stack.base_url}/executions/{execution.pk}/approvals/",
    )
    assert status == 403
    assert not DecisionSubmission.objects.exists()
    assert set(DeferredRequest.objects.values_list("status", flat=True)) == {"pending"}


def test_editing_the_policy_in_admin_makes_the_next_run_suspend_on_that_tool(
    live_stack, django_user_model, page, demo_thread
):
    django_user_model.objects.create_superuser("boss", password="boss-password-1")
    before = executions.start_execution(demo_thread, "look up REC-5")
    wait_for_status(before, ExecutionStatus.COMPLETED)

    page.goto(f"{live_stack.base_url}/admin/login/")
    page.fill("input[name=username]", "boss")
    page.fill("input[name=password]", "boss-password-1")
    page.click("input[type=submit]")
    page.goto(f"{live_stack.base_url}/admin/runs/hostpolicy/")
    page.click("text=default")
    page.fill("input[name=approval_rules-0-tool]", "lookup_record")
    page.fill("input[name=approval_rules-0-reason]", "Admin says ask.")
    page.fill("textarea[name=comment]", "lookups need a human")
    page.click("input[name=_save]")
    expect(page.locator(".messagelist .success")).to_be_visible()

    after = executions.start_execution(demo_thread, "look up REC-5")
    wait_for_status(after, ExecutionStatus.WAITING)

    request = DeferredRequest.objects.get(execution=after)
    assert (request.tool_name, request.reason) == ("lookup_record", "Admin says ask.")
    assert after.policy_version.created_by.username == "boss"
    page.goto(f"{live_stack.base_url}/admin/runs/hostpolicy/{after.policy_version.policy_id}/change/")
    expect(page.locator(".inline-group")).to_contain_text("lookups need a human")


def test_the_form_appears_live_when_the_open_execution_suspends(live_stack, operator_user, page):
    thread = factories.thread(model="demo", tools=[*TOOLS, "slow_step"])
    execution = executions.start_execution(thread, "slow 15 then deploy")
    log_in(page, live_stack.base_url, "op", "op-password-1")
    page.goto(f"{live_stack.base_url}/executions/{execution.pk}/")
    expect(page.locator("#connection")).to_have_attribute("data-state", "live", timeout=60_000)
    # The run is still in its slow step: no form until it suspends.
    expect(page.locator("#approval-form")).to_have_count(0)

    expect(page.locator("#approval-form")).to_be_visible(timeout=90_000)
    # One request: singular, in the form and in the answer to the post.
    expect(page.locator(".approval-set")).to_contain_text("The run suspended on 1 request;")
    row(page, "deploy_release").locator("input[value=approve]").check()
    page.click("button.submit-decisions")
    expect(page.locator(".approval-done")).to_have_text("Decisions recorded for 1 request; run 2 resumes.")

    expect(page.locator("#execution-status")).to_have_text("completed", timeout=60_000)
    assert ToolDispatch.objects.filter(tool_name="deploy_release").count() == 1
