"""A Host-managed child in Chromium: the parent links to its child, the child back, and an approval given on the
child's page resumes the parent live, whose timeline shows the child's answer as a decision item."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from runs.demo_profile import ensure_demo_profile
from runs.models import Execution, ExecutionStatus
from runs.services.lifecycle import executions
from tests.support.services import wait_until


def test_an_operator_follows_the_parent_to_its_child_approves_there_and_the_parent_completes(live_stack, operator_page):
    page = operator_page
    thread = executions.create_thread(ensure_demo_profile(), title="Parent of a child")
    parent = executions.start_execution(thread, "child: deploy release 2.0")
    wait_until(
        lambda: Execution.objects.filter(parent_request__execution=parent, status=ExecutionStatus.WAITING).exists(),
        timeout=60,
        what="the child to wait for its approval",
    )
    child = Execution.objects.get(parent_request__execution=parent)

    page.goto(f"{live_stack.base_url}/executions/{parent.pk}/")
    page.wait_for_selector('#connection[data-state="live"]', timeout=60_000)
    waiting = page.locator(".approval-set")
    expect(waiting.locator("h2")).to_have_text("Waiting for child executions")
    # Nothing of the parent's own set is for the operator to answer.
    expect(waiting.locator("form.approval-form")).to_have_count(0)
    expect(waiting.locator("a.child-link")).to_have_attribute("href", f"/executions/{child.pk}/")
    # The run's item and the time axis name what the parent waits for, not an approval.
    expect(page.locator(".item-interrupt .item-label")).to_have_text("waiting for a child execution")
    expect(page.locator("#time-axis .axis-wait .axis-cause")).to_have_text("waiting for a child execution")
    card = page.locator(".interrupt-card.reason-child")
    expect(card.locator(".interrupt-title")).to_have_text("waiting for a child execution: delegate_to_child")
    card.locator("a.interrupt-link").click()

    expect(page).to_have_url(re.compile(rf"/executions/{child.pk}/$"))
    expect(page.locator("#parent-link")).to_have_text(f"{thread} · execution #{parent.number}")
    page.wait_for_selector('#connection[data-state="live"]', timeout=60_000)
    deploy = page.locator(".deferred-request", has=page.locator("code.tool-name:text-is('deploy_release')"))
    deploy.locator("input[value=approve]").check()
    page.click("button.submit-decisions")
    expect(page.locator("#execution-status")).to_have_text("completed", timeout=60_000)

    page.locator("#parent-link").click()
    expect(page).to_have_url(re.compile(rf"/executions/{parent.pk}/$"))
    expect(page.locator("#execution-status")).to_have_text("completed", timeout=60_000)
    expect(page.locator("a.child-link")).to_have_text(f"{child.thread} · execution #1")
    expect(page.locator("#timeline")).to_contain_text("deployed 2.0", timeout=60_000)
    # The child's end is the answer to the parent's request, shown where an operator's decision would be.
    answered = page.locator(".item-decision")
    expect(answered.locator(".item-label")).to_have_text("answered by its child execution")
    expect(answered.locator(".decision-note")).to_have_text(f"The child execution ended: {child.thread} · execution #1")
    expect(answered.locator("a.answering-child")).to_have_attribute("href", f"/executions/{child.pk}/")
    expect(answered.locator(".decided-call .verdict")).to_have_text("the child's result")
    expect(page.locator("#time-axis .axis-cause").first).to_have_text("waiting for a child execution")
    expect(page.locator(".interrupt-card.reason-child .interrupt-closed")).to_have_text(
        "the child's result (see the decision below)"
    )
