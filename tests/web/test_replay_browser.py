"""A replay that diverged, in real Chromium: its page says what it replayed and where it diverged, its timeline
ends on the divergence, and the recording's page links to it."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from playwright.sync_api import expect

from tests.support.replays import record_and_replay
from tests.support.timeline_page import wait_until_drawn


def test_a_diverged_replay_shows_its_original_and_first_divergence(operator_page, live_stack):
    # In a thread of its own: the runner drives its own event loop, and Playwright's already runs in this one.
    with ThreadPoolExecutor(1) as pool:
        copy = pool.submit(record_and_replay).result()
    original = copy.replay_of
    page = operator_page

    page.goto(f"{live_stack.base_url}/executions/{copy.pk}/")
    wait_until_drawn(page, copy)

    expect(page.locator("#replay-of")).to_contain_text(f"#{original.pk}: recorded")
    expect(page.locator("#replay-divergence")).to_contain_text("at step 1 (tool): expected")
    expect(page.locator("#replay-divergence")).to_contain_text("a tool named lookup_record")
    expect(page.locator("#timeline")).to_contain_text("the replay diverged at step 1")
    page.locator("#replay-of a").click()
    expect(page.locator(".replay-link")).to_have_attribute("href", f"/executions/{copy.pk}/")
    expect(page.locator(".replay-link + .badge")).to_have_text("diverged at step 1")
