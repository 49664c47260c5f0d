"""The threads list is live where the user looks (#36): a thread started elsewhere appears as a row, in the
server's order, without a reload and without a "Reload" notice."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from runs.demo_profile import ensure_demo_profile
from runs.services.lifecycle import executions


def test_a_new_thread_appears_in_the_list(operator_page, live_stack):
    profile = ensure_demo_profile()
    executions.create_thread(profile, title="Already here")
    page = operator_page
    page.goto(f"{live_stack.base_url}/")
    page.wait_for_function("() => document.body.dataset.liveStatus === 'live'")
    page.evaluate("() => { window.__sameDocument = true; }")

    newcomer = executions.create_thread(profile, title="Started elsewhere")
    executions.start_execution(newcomer, "Look up REC-42")
    row = page.locator(f'tr[data-thread="{newcomer.pk}"]')
    expect(row).to_be_visible(timeout=30_000)
    expect(page.locator("table.threads tbody tr").first).to_have_attribute("data-thread", str(newcomer.pk))
    expect(row.locator(f'[data-thread-status="{newcomer.pk}"]')).to_have_class(re.compile(r"\bstatus-"))
    expect(page.locator("#new-activity")).to_be_hidden()
    assert page.evaluate("() => window.__sameDocument") is True
