"""Approvals as they change under an operator's eyes: decisions in the timeline, and live approval state.

Two browser contexts are two sessions (two operators); every assertion on a page waits with Playwright's
`expect`, since the change arrives over a websocket at an unknown moment.
"""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from runs.models import Thread
from tests.conftest import create_decider, log_in
from tests.host import builders
from tests.web.test_approval_browser import TOOLS, row, suspend_on_records

LIVE_MS = 60_000


@pytest.fixture
def demo_thread() -> Thread:
    return builders.thread(model="demo", tools=TOOLS)


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
    # The denied call keeps its card (the resume run never shows it again), now with its outcome.
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

    # A page opened afterwards replays the same item.
    operator_page.reload()
    expect(operator_page.locator(".item-decision .item-label")).to_have_text("decided by editor", timeout=LIVE_MS)
    expect(operator_page.locator(".interrupt-link")).to_have_count(0)
