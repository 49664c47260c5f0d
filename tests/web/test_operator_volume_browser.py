"""Operator work at volume in Chromium: the executions list's filters and a saved view, deciding from the inbox by
keyboard (a decision in at most two keys, nothing while typing), and a group decision."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect
from pydantic_ai import ToolCallPart

from runs.models import Decision
from runs.services.lifecycle import create_thread
from runs.services.timeline.publishing import publish_approvals_changed
from tests.support import factories

LIVE_MS = 30_000


@pytest.fixture(autouse=True)
def test_tools(scenario_tools):
    """The requests here are for the approval scenarios' tools."""


def _one_payment(to: str, title: str) -> factories.Suspended:
    call = ToolCallPart("send_payment", {"amount": 5000, "to": to}, tool_call_id="call-pay")
    return factories.suspended_execution(approvals=(call,), title=title)


def test_the_executions_list_filters_in_the_url_and_a_saved_view_opens_from_the_nav(operator_page, live_stack):
    failed = factories.make_execution(factories.make_thread("broken build"), status="failed")
    factories.make_execution(factories.make_thread("fine build"), status="completed")
    page = operator_page
    page.goto(f"{live_stack.base_url}/")
    page.get_by_role("link", name="Executions", exact=True).click()
    rows = page.locator("tr[data-execution]")
    expect(rows).to_have_count(2)

    page.locator("select[name=status]").select_option("failed")
    page.get_by_role("button", name="Filter").click()
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-execution", str(failed.pk))
    assert "status=failed" in page.url
    expect(page.locator("[data-status-count=failed]")).to_contain_text("1")

    page.get_by_label("Save these filters as").fill("Broken")
    page.get_by_role("button", name="Save view").click()
    expect(page.locator(".messages")).to_contain_text("Saved the view Broken")

    page.goto(f"{live_stack.base_url}/approvals/")
    page.locator(".saved-views-nav summary").click()
    page.locator("[data-saved-view=Broken]").click()
    expect(rows).to_have_count(1)
    assert "status=failed" in page.url


def test_deciding_from_the_inbox_by_keyboard(operator_page, live_stack):
    older = _one_payment("initech", "older")
    newer = _one_payment("globex", "newer")
    page = operator_page
    page.goto(f"{live_stack.base_url}/approvals/")
    rows = page.locator("#approvals-inbox tr[data-request]")
    expect(rows).to_have_count(2)

    # Typing in a field is never a decision.
    page.locator("[data-deny-reason]").first.focus()
    page.keyboard.type("ad")
    page.keyboard.press("Escape")
    assert not Decision.objects.exists()

    page.locator("h1").click()
    page.keyboard.press("?")
    expect(page.locator("#triage-keys")).to_be_visible()
    expect(page.locator("#triage-keys")).to_contain_text("approve")
    page.keyboard.press("?")
    expect(page.locator("#triage-keys")).to_be_hidden()

    # The newest request is current from the start: one key approves it.
    expect(rows.first).to_have_class(re.compile(r"\bcurrent\b"))
    page.keyboard.press("a")
    expect(page.locator(".messages")).to_contain_text("Decisions recorded for 1 request", timeout=LIVE_MS)
    assert Decision.objects.get(request=newer.requests["call-pay"]).verdict == "approved"

    # Two keys: move, then deny (with the reason asked for).
    factories.suspended_execution(title="a set of two")
    page.reload()
    expect(rows).to_have_count(3)
    page.once("dialog", lambda dialog: dialog.accept("not this vendor"))
    page.keyboard.press("j")
    expect(rows.nth(1)).to_be_focused()
    page.keyboard.press("k")
    page.keyboard.press("j")
    page.keyboard.press("j")
    expect(rows.nth(2)).to_have_attribute("data-request", str(older.requests["call-pay"].pk))
    page.keyboard.press("d")
    expect(page.locator(".messages")).to_contain_text("Decisions recorded", timeout=LIVE_MS)
    denial = Decision.objects.get(request=older.requests["call-pay"])
    assert denial.verdict == "denied" and denial.message == "not this vendor"


def test_one_decision_answers_a_group_of_identical_requests(operator_page, live_stack):
    same = [_one_payment("acme", f"same {n}") for n in range(3)]
    page = operator_page
    page.goto(f"{live_stack.base_url}/approvals/")
    head = page.locator("tr.group-head")
    expect(head).to_contain_text("3 identical requests")
    head.get_by_role("button", name="Approve all 3").click()
    expect(page.locator(".messages")).to_contain_text("Approved for a group of 3: 3 done, 0 skipped, 0 refused")
    assert {Decision.objects.get(request=s.requests["call-pay"]).verdict for s in same} == {"approved"}


def test_a_new_request_shows_a_toast_on_any_page(operator_page, live_stack):
    factories.suspended_execution(title="already waiting")
    page = operator_page
    page.goto(f"{live_stack.base_url}/executions/")
    expect(page.locator("html")).to_have_attribute("data-approvals-socket", "live", timeout=LIVE_MS)
    # What waited before the page opened is not news.
    expect(page.locator("[data-approvals-count]")).to_have_text("2")
    expect(page.locator("#approval-toast")).to_have_count(0)

    _one_payment("acme", "arrives later")
    publish_approvals_changed()
    toast = page.locator("#approval-toast")
    expect(toast).to_contain_text("A new request waits for your decision.", timeout=LIVE_MS)
    toast.get_by_role("link", name="Open the inbox").click()
    expect(page).to_have_url(re.compile(r"/approvals/$"))


def test_a_bulk_approve_runs_as_a_job_with_live_progress_and_a_result_per_item(operator_page, live_stack):
    waiting = [_one_payment("acme", f"bulk {n}") for n in range(3)]
    finished = factories.make_execution(status="completed")
    page = operator_page
    page.goto(f"{live_stack.base_url}/executions/?status=waiting")
    expect(page.locator("tr[data-execution]")).to_have_count(3)
    page.locator("#bulk-form select[name=action]").select_option("approve")
    page.get_by_role("button", name="On all 3 matching").click()
    expect(page.locator("h1")).to_have_text("Approve 3 executions?")
    expect(page.locator("#bulk-sample li")).to_have_count(3)
    page.locator("#bulk-confirm").click()

    progress = page.locator("#bulk-progress")
    expect(progress).to_have_attribute("data-finished", "yes", timeout=LIVE_MS)
    expect(progress.locator("[data-outcome-count=done] b")).to_have_text("3")
    for suspended in waiting:
        expect(page.locator(f"tr[data-item-execution='{suspended.execution.pk}'] [data-outcome]")).to_have_text("done")
    assert {Decision.objects.get(request=s.requests["call-pay"]).verdict for s in waiting} == {"approved"}
    assert finished.pk not in {s.execution.pk for s in waiting}


def test_a_bulk_recover_from_the_executions_list_starts_recovery_runs_with_a_result_per_item(operator_page, live_stack):
    failed = []
    for n in range(2):
        thread = create_thread(factories.shared_profile("recover-browser"), title=f"broken {n}")
        execution = factories.make_execution(thread, status="failed")
        factories.make_run(execution, status="failed", failure_code="model_failed")
        failed.append(execution)
    running = factories.make_execution(factories.make_thread("still running"), status="running")
    page = operator_page
    page.goto(f"{live_stack.base_url}/executions/")
    for execution in [*failed, running]:
        page.locator(f"tr[data-execution='{execution.pk}'] input[type=checkbox]").check()
    page.locator("#bulk-form select[name=action]").select_option("recover")
    page.get_by_role("button", name="On the selected").click()
    expect(page.locator("h1")).to_have_text("Recover 3 executions?")
    page.locator("#bulk-confirm").click()

    progress = page.locator("#bulk-progress")
    expect(progress).to_have_attribute("data-finished", "yes", timeout=LIVE_MS)
    expect(progress.locator("[data-outcome-count=done] b")).to_have_text("2")
    expect(progress.locator("[data-outcome-count=skipped] b")).to_have_text("1")
    for execution in failed:
        row = page.locator(f"tr[data-item-execution='{execution.pk}']")
        expect(row.locator("[data-outcome]")).to_have_text("done")
        expect(row.locator("[data-message]")).to_have_text("recovery run 2 queued.")
    expect(page.locator(f"tr[data-item-execution='{running.pk}'] [data-message]")).to_have_text(
        "It is running, not failed."
    )
    # The live worker runs each recovery run: the execution's page then says which run recovered it.
    page.goto(f"{live_stack.base_url}/executions/{failed[0].pk}/")
    expect(page.locator("#execution-status")).to_have_text("completed", timeout=LIVE_MS)
    page.reload()
    expect(page.locator("#recovered-by")).to_have_text("recovered by run 2")


def test_a_bulk_approve_from_the_inbox_of_the_selected_rows(operator_page, live_stack):
    chosen = [_one_payment("acme", f"chosen {n}") for n in range(2)]
    left = _one_payment("initech", "left alone")
    page = operator_page
    page.goto(f"{live_stack.base_url}/approvals/")
    expect(page.locator("#inbox-bulk-form")).to_contain_text("On all 3 in the inbox")
    for suspended in chosen:
        page.locator(f"tr[data-request='{suspended.requests['call-pay'].pk}'] input[type=checkbox]").check()
    page.locator("#inbox-bulk-form select[name=action]").select_option("approve")
    page.locator("#inbox-bulk-form").get_by_role("button", name="On the selected").click()
    expect(page.locator("h1")).to_have_text("Approve 2 executions?")
    expect(page.locator("#bulk-sample li")).to_have_count(2)
    page.locator("#bulk-confirm").click()

    progress = page.locator("#bulk-progress")
    expect(progress).to_have_attribute("data-finished", "yes", timeout=LIVE_MS)
    expect(progress.locator("[data-outcome-count=done] b")).to_have_text("2")
    for suspended in chosen:
        expect(page.locator(f"tr[data-item-execution='{suspended.execution.pk}'] [data-outcome]")).to_have_text("done")
    assert {Decision.objects.get(request=s.requests["call-pay"]).verdict for s in chosen} == {"approved"}
    assert not Decision.objects.filter(request=left.requests["call-pay"]).exists()
