"""Compare across executions, in real Chromium: from a diverged replay's page to the comparison with its original,
the first divergence marked."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from playwright.sync_api import expect

from tests.support.replays import record_and_replay
from tests.support.timeline_page import wait_until_drawn


def test_compare_opens_from_a_replays_page_with_the_first_divergence_marked(operator_page, live_stack):
    # In a thread of its own: the runner drives its own event loop, and Playwright's already runs in this one.
    with ThreadPoolExecutor(1) as pool:
        copy = pool.submit(record_and_replay).result()
    page = operator_page
    page.goto(f"{live_stack.base_url}/executions/{copy.pk}/")
    wait_until_drawn(page, copy)

    page.locator("#compare-with a.compare-link", has_text="the original it replayed").click()

    expect(page.locator("#compare-verdict")).to_contain_text("The runs diverge at step 2")
    marked = page.locator("#compare-steps tr.first-divergence")
    expect(marked).to_have_count(1)
    expect(marked.locator(".divergence-badge")).to_have_text("first divergence")
    expect(marked.locator(".compare-right")).to_contain_text("replay_diverged")
    expect(marked.locator(".compare-note")).to_contain_text("a failure in run B")
    expect(page.locator("#compare-summary .cost-difference")).to_have_text("unknown")
