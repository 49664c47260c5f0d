"""Signal over noise on the execution page (#36): harness bookkeeping behind one toggle, a recovered execution
that says so once (not a red failure beside a green "completed"), a title people can tell apart, long inputs
clamped with "show more", ids copied from their lane head."""

from __future__ import annotations

import re

from ag_ui.core import (
    CustomEvent,
    RunErrorEvent,
    RunStartedEvent,
)
from playwright.sync_api import expect

from tests.support import factories
from tests.support.timeline_page import wait_until_drawn

LONG_INPUT = "Please check every record of the export. " * 60


def recovered_execution():
    execution = factories.make_execution(factories.make_thread("Export check"), status="completed", input=LONG_INPUT)
    thread_id = execution.thread.thread_id
    first = factories.make_run(
        execution,
        status="abandoned",
        failure_code="worker_lost",
        failure_message="The worker running this run stopped renewing its lease.",
    )
    factories.append_events(
        first,
        [
            RunStartedEvent(thread_id=thread_id, run_id=first.run_id),
            CustomEvent(name="a13n.input.user", value={"event": {"source": "user", "content": LONG_INPUT}}),
            CustomEvent(name="a13n.harness.lifecycle", value={"type": "model_request_started"}),
            RunErrorEvent(message="The worker stopped.", code="worker_lost"),
        ],
    )
    second = factories.make_run(execution, reason="recovery", previous_run=first, status="completed")
    factories.append_events(second, factories.text_run_events(second, ["All records checked."]))
    return execution, first, second


def test_the_execution_page_says_what_matters_first(operator_page, live_stack):
    execution, first, second = recovered_execution()
    page = operator_page
    page.goto(f"{live_stack.base_url}/executions/{execution.pk}/")
    wait_until_drawn(page, execution)

    # A title people can tell apart: the thread's, with the execution's number.
    expect(page.locator("h1")).to_have_text("Export check · execution #1")

    # Recovered, said once: no "Failed run" block, no red label beside the green status.
    expect(page.locator("#execution-status")).to_have_text("completed")
    expect(page.locator("#recovered-by")).to_have_text("recovered by run 2")
    expect(page.locator(".facts .recovered-facts")).to_have_text(
        "run 1 failed (worker_lost); run 2 recovered the execution"
    )
    expect(page.locator(".facts .failure")).to_have_count(0)
    expect(page.locator(".facts dt", has_text="Failure")).to_have_count(0)
    reason = page.locator(f'.lane-head[data-run="{second.pk}"] .lane-reason')
    expect(reason).to_have_text("recovery")
    expect(reason).not_to_have_css("color", "rgb(197, 34, 31)")

    # Harness bookkeeping is behind one toggle.
    group = page.locator(".item-group")
    expect(group).to_have_count(1)
    expect(group).to_be_hidden()
    toggle = page.locator("#internal-toggle")
    toggle.click()
    expect(group).to_be_visible()
    expect(toggle).to_have_attribute("aria-pressed", "true")
    toggle.click()
    expect(group).to_be_hidden()

    # A 2,500-character input is clamped, in the facts and in its lane, until asked for.
    for text in (page.locator(".facts .input-text"), page.locator(".item-input .message-text")):
        expect(text).to_have_class(re.compile(r"\bclamped\b"))
        short = text.bounding_box()["height"]
        more = text.locator("xpath=following-sibling::button[1]")
        expect(more).to_have_text(re.compile(r"^show more"))
        more.click()
        expect(text).not_to_have_class(re.compile(r"\bclamped\b"))
        assert text.bounding_box()["height"] > short * 2
        expect(more).to_have_text("show less")

    # The run id is one click from the clipboard.
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    head = page.locator(f'.lane-head[data-run="{first.pk}"]')
    head.hover()
    head.locator("button.copy").click()
    expect(head.locator("button.copy")).to_have_text("copied")
    assert page.evaluate("navigator.clipboard.readText()") == first.run_id
