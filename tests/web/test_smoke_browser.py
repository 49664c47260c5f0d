"""The foundation's end-to-end check: the real stack serves a login page and an operator reaches the threads page."""

import re

from playwright.sync_api import expect

from tests.support.browser import log_in


def test_operator_logs_in_and_sees_the_threads_page(live_stack, operator_user, page):
    page.goto(f"{live_stack.base_url}/")
    # Anonymous visitors are sent to the login page first.
    expect(page).to_have_url(re.compile("/login/"))
    log_in(page, live_stack.base_url, "op", "op-password-1")
    expect(page.locator("h1")).to_have_text("Threads")
    expect(page.locator(".who")).to_have_text("op")


def test_wrong_password_is_refused(live_stack, operator_user, page):
    page.goto(f"{live_stack.base_url}/login/")
    page.fill("input[name=username]", "op")
    page.fill("input[name=password]", "wrong")
    page.click("button[type=submit]")
    expect(page.locator(".error")).to_be_visible()
    expect(page).to_have_url(re.compile("/login/"))
