"""The executions list in Chromium: the counts per status arrive after the page and fill the "all matching" button;
without scripts, the page links to itself with the counts."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.support import factories
from tests.support.browser import log_in


def test_the_counts_arrive_after_the_page_and_name_how_many_all_matching_acts_on(operator_page, live_stack):
    factories.make_execution(status="failed")
    factories.make_execution(status="failed")
    factories.make_execution(status="completed")
    page = operator_page

    page.goto(f"{live_stack.base_url}/executions/?status=failed")

    counts = page.get_by_role("navigation", name="Counts per status")
    expect(counts.locator("[data-status-count=failed] .count")).to_have_text("2")
    expect(counts.locator("[data-status-count=any] .count")).to_have_text("3")
    expect(counts.locator("[data-status-count=failed]")).to_have_attribute("aria-current", "true")
    expect(page.get_by_role("button", name="On all 2 matching")).to_be_visible()
    expect(page.locator("[data-show-counts]")).to_have_count(0)

    counts.locator("[data-status-count=completed]").click()
    expect(page.locator("tr[data-execution]")).to_have_count(1)
    expect(counts.locator("[data-status-count=completed]")).to_have_attribute("aria-current", "true")


def test_without_scripts_a_link_shows_the_counts(browser, live_stack, operator_user):
    factories.make_execution(status="failed")
    factories.make_execution(status="completed")
    context = browser.new_context(java_script_enabled=False)
    try:
        page = context.new_page()
        log_in(page, live_stack.base_url, "op", "op-password-1")
        page.goto(f"{live_stack.base_url}/executions/?status=failed")

        counts = page.get_by_role("navigation", name="Counts per status")
        expect(counts.locator("[data-status-count]")).to_have_count(0)
        counts.get_by_role("link", name="show counts per status").click()
        expect(counts.locator("[data-status-count=failed] .count")).to_have_text("1")
        expect(counts.locator("[data-status-count=any] .count")).to_have_text("2")
        expect(page.get_by_role("button", name="On all 1 matching")).to_be_visible()
        expect(page.locator("tr[data-execution]")).to_have_count(1)
    finally:
        context.close()
