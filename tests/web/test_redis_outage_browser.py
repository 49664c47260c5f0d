"""In Chromium, with Redis killed and started again on its port: the banner, the notice after starting work,
"waiting for the queue", and the execution page going live again by itself once Redis is back."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from runs.demo_profile import ensure_demo_profile
from tests.conftest import log_in
from tests.outage_stack import Outage, use_short_leases
from tests.services import wait_until
from tests.web.timeline_page import screenshot

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def outage(settings, operator_user):
    use_short_leases()
    ensure_demo_profile()
    running = Outage(settings, workers=1)
    try:
        yield running.start()
    finally:
        running.stop()


def test_the_banner_and_the_notice_show_while_redis_is_down_and_the_page_goes_live_again(outage, page):
    base_url = outage.daphne.base_url
    log_in(page, base_url, "op", "op-password-1")
    banner = page.locator("#queue-banner")
    expect(banner).to_have_count(0)
    start_thread(page, base_url, "Before the outage", "Look up REC-8.")
    expect(page.locator("#execution-status")).to_have_text("completed", timeout=60_000)
    connection = page.locator("#connection")
    expect(connection).to_have_attribute("data-state", "live")

    outage.redis.kill()
    page.goto(f"{base_url}/")
    # The server remembers its last look at Redis for a moment (a cheap check per page); a reload after that shows it.
    wait_until(lambda: page.reload() and banner.count() == 1, timeout=15, what="the banner after a reload")
    expect(banner).to_contain_text("The queue (Redis) cannot be reached")
    start_thread(page, base_url, "Started during the outage", "Look up REC-9.")

    expect(page.locator(".messages .warning")).to_contain_text("The queue (Redis) cannot be reached right now")
    expect(page.locator("#queue-wait")).to_contain_text("Waiting for the queue")
    expect(banner).to_be_visible()
    expect(page.locator("#execution-status")).to_have_text("queued")
    screenshot(page, "redis-outage.png")

    outage.redis.start()
    # The page's socket reconnects by itself; the sweeper queues the run again and its status arrives live.
    expect(connection).to_have_attribute("data-state", "live", timeout=60_000)
    expect(page.locator("#execution-status")).to_have_text("completed", timeout=120_000)
    expect(page.locator("#queue-wait")).to_have_count(0)
    wait_until(lambda: page.reload() and banner.count() == 0, timeout=15, what="no banner after a reload")


def start_thread(page, base_url: str, title: str, text: str) -> None:
    """The threads page's "New thread" form, as an operator fills it in."""
    page.goto(f"{base_url}/")
    # The form opens by itself on an empty threads page; a click on its summary would close it again.
    page.locator("details.new-thread").evaluate("details => { details.open = true; }")
    form = page.locator("details.new-thread form")
    form.locator("input[name=title]").fill(title)
    form.locator("textarea[name=input]").fill(text)
    form.locator("button[type=submit]").click()
