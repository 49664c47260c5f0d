"""Approvals as they change under an operator's eyes: decisions in the timeline, and live approval state.

Two browser contexts are two sessions (two operators); every assertion on a page waits with Playwright's
`expect`, since the change arrives over a websocket at an unknown moment.
"""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from runs.approval_views import INBOX_PAGE_SIZE
from runs.models import DeferredRequest, Execution, ExecutionStatus, Thread, Verdict
from runs.services.lifecycle import Answer, cancellation, executions, expire_overdue_requests, submit_decisions
from runs.services.timeline.publishing import publish_approvals_changed
from tests.support import factories
from tests.support.approval_pages import TOOLS, row, suspend_on_records, wait_for_status
from tests.support.browser import log_in
from tests.support.factories import create_decider
from tests.support.services import wait_until
from tests.support.timeline_page import screenshot

LIVE_MS = 60_000


@pytest.fixture
def demo_thread() -> Thread:
    return factories.thread(model="demo", tools=TOOLS)


@pytest.fixture
def editor(django_user_model):
    return create_decider(django_user_model, "editor", "editor-password-1")


@pytest.fixture
def second_session(browser, live_stack, editor):
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    opened = context.new_page()
    opened.set_default_timeout(15_000)
    log_in(opened, live_stack.base_url, "editor", "editor-password-1")
    yield opened
    context.close()


def open_live(page, base_url: str, execution) -> None:
    page.goto(f"{base_url}/executions/{execution.pk}/")
    expect(page.locator("#connection")).to_have_attribute("data-state", "live", timeout=LIVE_MS)


def test_a_decision_is_an_item_with_the_editor_s_name_the_argument_diff_and_each_outcome(
    operator_page, live_stack, second_session, demo_thread
):
    execution = suspend_on_records(demo_thread)
    open_live(operator_page, live_stack.base_url, execution)
    expect(operator_page.locator(".interrupt-link")).to_have_count(2)

    open_live(second_session, live_stack.base_url, execution)
    lookup, search = row(second_session, "lookup_record"), row(second_session, "search_records")
    lookup.locator("input[value=edit]").check()
    lookup.locator("textarea").fill(json.dumps({"record_id": "REC-7"}))
    search.locator("input[value=deny]").check()
    search.locator("input[type=text]").fill("No searching today.")
    second_session.click("button.submit-decisions")

    # The operator's form closes by itself, and says who answered.
    expect(operator_page.locator("#approval-form")).to_have_count(0, timeout=LIVE_MS)
    expect(operator_page.locator(".approval-set")).to_have_count(0)
    expect(operator_page.locator(".approval-closed")).to_contain_text("Answered by editor")
    decision = operator_page.locator(".item-decision")
    expect(decision).to_have_count(1, timeout=LIVE_MS)
    expect(decision.locator(".item-label")).to_have_text("decided by editor")
    expect(decision.locator(".item-extra")).to_have_text("run 2 resumes")
    edited = decision.locator(".decided-call.verdict-approved")
    expect(edited.locator(".verdict")).to_have_text("approved with edited arguments")
    expect(edited.locator(".arg-diff tr.diff-changed th")).to_have_text("record_id")
    expect(edited.locator(".arg-diff del")).to_have_text('"REC-42"')
    expect(edited.locator(".arg-diff ins")).to_have_text('"REC-7"')
    expect(decision.locator(".verdict-denied .decision-message")).to_have_text("No searching today.")
    # The denied call's own card gets its outcome (its result shows in the resumed run's lane).
    denied_card = operator_page.locator(".item-tool.outcome-denied", has_text="search_records")
    expect(denied_card.locator(".outcome-text")).to_have_text("denied by editor: No searching today.")
    expect(operator_page.locator(".interrupt-link")).to_have_count(0)
    expect(operator_page.locator(".interrupt-closed").first).to_contain_text("see the decision below")
    # The item sits between the suspended run and the run that resumes it.
    expect(operator_page.locator("#execution-status")).to_have_text("completed", timeout=LIVE_MS)
    positions = operator_page.evaluate(
        """() => Array.from(document.querySelectorAll('#timeline > .item'), (item) => ({
              decision: item.classList.contains('item-decision'),
              column: getComputedStyle(item).getPropertyValue('--col').trim(),
            }))"""
    )
    index = next(i for i, item in enumerate(positions) if item["decision"])
    assert {item["column"] for item in positions[: index + 1]} == {"0"}
    assert {item["column"] for item in positions[index + 1 :]} == {"1"}

    decision.scroll_into_view_if_needed()
    screenshot(operator_page, "decision-item.png")

    # A page opened afterwards replays the same item.
    operator_page.reload()
    expect(operator_page.locator(".item-decision .item-label")).to_have_text("decided by editor", timeout=LIVE_MS)
    expect(operator_page.locator(".interrupt-link")).to_have_count(0)


def test_the_form_disables_itself_when_its_timeout_passes_and_closes_when_the_host_expires_it(
    operator_page, live_stack, demo_thread
):
    factories.configure_policy(approval_rules=[{"tool": "deploy_release"}], approval_timeout_seconds=12)
    execution = executions.start_execution(demo_thread, "deploy the release")
    wait_for_status(execution, ExecutionStatus.WAITING)
    open_live(operator_page, live_stack.base_url, execution)

    # The countdown runs on the page, then the form turns itself off when it reaches zero.
    countdown = operator_page.locator(".deferred-request .countdown")
    expect(countdown).to_have_text(re.compile(r"in 0m \d\ds|now \(expired\)"))
    expect(countdown).to_have_text("now (expired)", timeout=LIVE_MS)
    expect(operator_page.locator("button.submit-decisions")).to_be_disabled()
    expect(operator_page.locator(".approval-error")).to_contain_text("approval timeout has passed")

    # What the sweeper does once the deadline passed: the host answers with denials; the box closes live.
    wait_until(lambda: expire_overdue_requests() > 0, timeout=30, what="the sweep to expire the set")
    expect(operator_page.locator(".approval-set")).to_have_count(0, timeout=LIVE_MS)
    expect(operator_page.locator(".approval-closed")).to_contain_text("Expired: no answer arrived")
    expect(operator_page.locator(".item-decision .item-label")).to_have_text("expired")
    expect(operator_page.locator(".item-tool.outcome-expired .outcome-text")).to_contain_text("expired by the host")


def test_the_inbox_and_the_badge_on_every_page_follow_the_open_requests_live(
    operator_page, live_stack, operator_user, demo_thread
):
    factories.configure_policy(approval_rules=[{"tool": "deploy_release"}])
    operator_page.goto(f"{live_stack.base_url}/approvals/")
    threads_page = operator_page.context.new_page()
    threads_page.goto(f"{live_stack.base_url}/")
    for page in (operator_page, threads_page):
        expect(page.locator("html")).to_have_attribute("data-approvals-socket", "live", timeout=LIVE_MS)
        expect(page.locator("[data-approvals-count]")).to_be_hidden()
    expect(operator_page.locator("#approvals-inbox .empty")).to_be_visible()

    first = executions.start_execution(demo_thread, "deploy the release")
    other = factories.thread(model="demo", tools=TOOLS)
    second = executions.start_execution(other, "deploy the release")

    inbox_rows = operator_page.locator("#approvals-inbox tr[data-request]")
    expect(inbox_rows).to_have_count(2, timeout=LIVE_MS)
    for page in (operator_page, threads_page):
        expect(page.locator("[data-approvals-count]")).to_have_text("2")
    # Newest request first. The two run at once on the worker, so either may suspend first.
    newest, oldest = DeferredRequest.objects.order_by("-created_at", "-id").values_list("execution_id", flat=True)
    expect(inbox_rows.first.locator("a").first).to_have_attribute("href", f"/executions/{newest}/")
    expect(inbox_rows.last.locator("a").first).to_have_attribute("href", f"/executions/{oldest}/")

    answer_with_a_denial(first, operator_user)
    expect(inbox_rows).to_have_count(1, timeout=LIVE_MS)
    expect(inbox_rows.first.locator("a").first).to_have_attribute("href", f"/executions/{second.pk}/")
    for page in (operator_page, threads_page):
        expect(page.locator("[data-approvals-count]")).to_have_text("1")

    # Cancelling the other execution closes its form, its inbox row and the badge's last count.
    execution_page = operator_page.context.new_page()
    open_live(execution_page, live_stack.base_url, second)
    expect(execution_page.locator("#approval-form")).to_be_visible()
    cancellation.cancel_execution(second, user=operator_user)
    expect(operator_page.locator("#approvals-inbox .empty")).to_be_visible(timeout=LIVE_MS)
    for page in (operator_page, threads_page, execution_page):
        expect(page.locator("[data-approvals-count]")).to_be_hidden()
    expect(execution_page.locator(".approval-set")).to_have_count(0)
    expect(execution_page.locator(".approval-closed")).to_contain_text("Cancelled by op")
    expect(execution_page.locator(".item-decision .item-label")).to_have_text("cancelled by op")


def test_a_later_page_of_the_inbox_follows_the_open_requests_live(operator_page, live_stack, operator_user):
    # Two requests a set: one page full, and the last set on page 2.
    sets = [factories.suspended_execution(title=f"set {n}") for n in range(INBOX_PAGE_SIZE // 2 + 1)]
    operator_page.goto(f"{live_stack.base_url}/approvals/?sort=oldest&page=2")
    expect(operator_page.locator("html")).to_have_attribute("data-approvals-socket", "live", timeout=LIVE_MS)
    rows = operator_page.locator("#approvals-inbox tr[data-request]")
    expect(rows).to_have_count(2)
    expect(operator_page.locator("#approvals-inbox .pagination")).to_contain_text("page 2 of 2")

    newer = factories.suspended_execution(title="newer")
    publish_approvals_changed()
    expect(rows).to_have_count(4, timeout=LIVE_MS)
    # The execution's link in each row (the first column holds the row's bulk checkbox).
    newer_links = operator_page.locator(
        f"#approvals-inbox tr[data-request] td:nth-child(2) a[href='/executions/{newer.execution.pk}/']"
    )
    expect(newer_links).to_have_count(2)

    # The oldest set, on page 1, closes: page 2 moves up by two and keeps only the newest set.
    cancellation.cancel_execution(sets[0].execution, user=operator_user)
    expect(rows).to_have_count(2, timeout=LIVE_MS)
    expect(newer_links).to_have_count(2)
    expect(operator_page.locator("#approvals-inbox .pagination")).to_contain_text("page 2 of 2")
    expect(operator_page.locator("[data-approvals-count]")).to_have_text(str(len(sets) * 2))


def answer_with_a_denial(execution: Execution, user) -> None:
    execution.refresh_from_db()
    execution.thread.refresh_from_db()
    request = DeferredRequest.objects.get(execution=execution)
    submit_decisions(
        execution,
        checkpoint_id=execution.thread.selected_checkpoint_id,
        key=f"deny-{execution.pk}",
        answers=[Answer(request.tool_call_id, Verdict.DENIED, message="Not now.")],
        user=user,
    )
