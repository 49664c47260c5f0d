"""What the Chromium tests share beyond their fixtures: logging in through the login form."""

from __future__ import annotations

from playwright.sync_api import Page


def log_in(page: Page, base_url: str, username: str, password: str) -> None:
    page.goto(f"{base_url}/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base_url}/")
