"""Pages that hold up, in real Chromium: shared table styles, long tokens, 390 px phones, favicon, error pages,
labels and plurals, run numbers, call order, cancel's confirmation and the tool card it interrupts."""

from __future__ import annotations

import json
import re

import pytest
from ag_ui.core import (
    CustomEvent,
    ReasoningEncryptedValueEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    RunFinishedEvent,
    RunStartedEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)
from django.views.defaults import server_error
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import expect
from pydantic_ai import DeferredToolRequests as NativeDeferredToolRequests
from pydantic_ai import ToolCallPart

from runs.harness import HarnessRunResult, PendingDeferredCalls
from runs.models import DeferredRequest, Execution
from runs.services.store.checkpoints import load
from runs.services.worker import runner
from tests.support import factories
from tests.support.browser import log_in
from tests.support.factories import suspended_execution
from tests.support.timeline_page import screenshot, wait_until_drawn

LONG_TOKEN = "x" * 600


@pytest.fixture(autouse=True)
def approval_tools(scenario_tools):
    """Every test here answers requests for the approval scenarios' tools."""


def long_token_execution() -> Execution:
    """Two runs (pk and number differ from the second on), a 600-character token in the input and the text."""
    factories.make_execution(factories.make_thread("Other thread"), status="completed")
    execution = factories.make_execution(
        factories.make_thread(f"Tokens {LONG_TOKEN}"), status="completed", input=LONG_TOKEN
    )
    thread_id = execution.thread.thread_id
    first = factories.make_run(execution, status="completed")
    factories.append_events(first, factories.text_run_events(first, [f"token {LONG_TOKEN} end"]))
    second = factories.make_run(execution, reason="resume", previous_run=first, status="completed")
    factories.append_events(
        second,
        [
            RunStartedEvent(thread_id=thread_id, run_id=second.run_id),
            CustomEvent(name="a13n.pydantic_ai.part_start", value={"part": 0}),
            CustomEvent(name="a13n.harness.lifecycle", value={"type": "model_request_started"}),
            ReasoningMessageStartEvent(message_id="r1", role="reasoning"),
            ReasoningMessageContentEvent(message_id="r1", delta="x"),
            ReasoningMessageEndEvent(message_id="r1"),
            ReasoningEncryptedValueEvent(subtype="message", entity_id="r1", encrypted_value="abcd"),
            RunFinishedEvent(thread_id=thread_id, run_id=second.run_id, outcome={"type": "success"}),
        ],
    )
    return execution


def phone_page(browser, live_stack):
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    page.set_default_timeout(15_000)
    log_in(page, live_stack.base_url, "op", "op-password-1")
    return context, page


def expect_no_sideways_scroll(page, name: str) -> None:
    try:
        page.wait_for_function("() => document.documentElement.scrollWidth <= window.innerWidth", timeout=5_000)
    except PlaywrightTimeout:
        wide = page.evaluate(
            """() => Array.from(document.querySelectorAll('body *'))
                  .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1)
                  .slice(0, 8).map(e => `${e.tagName}.${e.className} ${Math.round(e.getBoundingClientRect().right)}`)"""
        )
        raise AssertionError(f"the {name} page is wider than the screen: {wide}") from None


def test_no_page_is_wider_than_a_390_px_phone(live_stack, operator_user, browser):
    execution = long_token_execution()
    waiting = suspended_execution(title=f"waiting {LONG_TOKEN}")
    run = execution.runs.get(number=2)
    context, page = phone_page(browser, live_stack)
    try:
        base = live_stack.base_url
        pages = {
            "threads": "/",
            "thread": f"/threads/{execution.thread.pk}/",
            "execution": f"/executions/{execution.pk}/",
            "waiting execution": f"/executions/{waiting.execution.pk}/",
            "run": f"/runs/{run.pk}/",
            "event": f"/executions/{execution.pk}/events/1/",
            "approvals": "/approvals/",
            "audit": "/approvals/audit/",
            "not found": "/no/such/page/",
        }
        for name, path in pages.items():
            page.goto(base + path)
            expect(page.locator("main")).to_be_visible()
            expect_no_sideways_scroll(page, name)
            if name == "execution":
                wait_until_drawn(page, execution)
                expect(page.locator(".item-message").first).to_contain_text(LONG_TOKEN[:50])
                expect_no_sideways_scroll(page, name)
                screenshot(page, "phone-execution.png")
        # The header's background spans the screen and its nav wrapped onto more lines instead of overflowing.
        expect(page.locator(".topbar")).to_have_js_property("offsetWidth", 390)
    finally:
        context.close()


def test_approvals_and_audit_tables_have_the_shared_styles(operator_page, live_stack):
    suspended_execution(title="styled")
    for path in ("/approvals/", "/approvals/audit/"):
        operator_page.goto(live_stack.base_url + path)
        header = operator_page.locator("table.list th").first
        expect(header).to_have_css("background-color", "rgb(250, 251, 252)")
        expect(header).to_have_css("text-align", "left")


def test_a_favicon_and_styled_error_pages(operator_page, live_stack):
    base = live_stack.base_url
    expect(operator_page.locator("link[rel=icon]")).to_have_attribute("href", "/static/img/favicon.svg")
    icon = operator_page.request.get(f"{base}/favicon.ico")
    assert icon.ok and icon.headers["content-type"].startswith("image/svg")
    response = operator_page.goto(f"{base}/threads/999999/")
    assert response.status == 404
    expect(operator_page.locator(".error-page h1")).to_have_text("Not found")
    expect(operator_page.locator(".topbar .brand")).to_be_visible()
    # /threads/ itself is the list of threads.
    operator_page.goto(f"{base}/threads/")
    expect(operator_page.locator("h1")).to_have_text("Threads")


def test_the_server_error_page_is_styled(operator_page, live_stack, rf):
    """Django's own 500 answer (handler500, DEBUG off), shown in Chromium with the site's styles and favicon."""
    body = server_error(rf.get("/")).content
    address = f"{live_stack.base_url}/broken/"
    operator_page.route(address, lambda route: route.fulfill(status=500, body=body, content_type="text/html"))
    response = operator_page.goto(address)
    assert response.status == 500
    expect(operator_page.locator(".error-page h1")).to_have_text("Something went wrong")
    expect(operator_page.locator("body")).to_have_css("background-color", "rgb(247, 248, 250)")
    expect(operator_page.locator(".topbar .brand")).to_be_visible()
    expect(operator_page.locator("link[rel=icon]")).to_have_attribute("href", "/static/img/favicon.svg")


def test_event_groups_have_human_labels_and_counts_have_plurals(operator_page, live_stack):
    execution = long_token_execution()
    operator_page.goto(f"{live_stack.base_url}/executions/{execution.pk}/")
    wait_until_drawn(operator_page, execution)
    group = operator_page.locator(".item-group summary")
    expect(group).to_have_text("2 harness events: model part started, run lifecycle")
    expect(group).not_to_contain_text("a13n.")
    operator_page.locator("#internal-toggle").click()
    group.click()
    # Each row keeps its raw name next to the label.
    expect(operator_page.locator(".group-row .group-raw-name").first).to_have_text("a13n.pydantic_ai.part_start")
    reasoning = operator_page.locator(".item-reasoning")
    expect(reasoning.locator("summary")).to_have_text("reasoning · 1 character")
    # Compact: one word, the explanation on hover.
    expect(reasoning.locator(".item-extra")).to_have_text("signed")
    expect(reasoning.locator(".item-extra")).to_have_attribute("title", re.compile("not readable"))
    expect(operator_page.locator(".lane-head[data-run] .lane-count").first).to_have_text("5 events")


def test_a_count_of_one_is_singular(operator_page, live_stack):
    page = operator_page
    lone = factories.make_execution(factories.make_thread("One of each"), status="completed")
    run = factories.make_run(lone, status="completed")
    thread_id = lone.thread.thread_id
    factories.append_events(
        run,
        [
            RunStartedEvent(thread_id=thread_id, run_id=run.run_id),
            CustomEvent(name="a13n.harness.lifecycle", value={"type": "model_request_started"}),
        ],
    )
    page.goto(f"{live_stack.base_url}/executions/{lone.pk}/")
    wait_until_drawn(page, lone)
    expect(page.locator("#execution-totals")).to_have_text(re.compile(r"^1 run · "))
    expect(page.locator(".item-group summary")).to_have_text("1 harness event: run lifecycle")

    # Two runs of one event each, doing the same single step.
    twins = factories.make_execution(factories.make_thread("Twins"), status="completed")
    for reason in ("initial", "recovery"):
        twin = factories.make_run(twins, reason=reason, status="completed")
        factories.append_events(twin, [RunStartedEvent(thread_id=twins.thread.thread_id, run_id=twin.run_id)])
    page.goto(f"{live_stack.base_url}/executions/{twins.pk}/")
    wait_until_drawn(page, twins)
    counts = page.locator(".lane-head[data-run] .lane-count")
    expect(counts).to_have_text(["1 event", "1 event"])
    page.locator("#compare-toggle").click()
    expect(page.locator("#compare .compare-verdict")).to_have_text("The runs do the same 1 step.")


def test_the_lane_the_raw_json_and_the_run_page_give_the_same_run_number(operator_page, live_stack):
    execution = long_token_execution()
    second = execution.runs.get(number=2)
    assert second.pk != second.number
    last = execution.timeline.order_by("-position").first().position
    base = live_stack.base_url
    operator_page.goto(f"{base}/executions/{execution.pk}/")
    expect(operator_page.locator(f'.lane-head[data-run="{second.pk}"] .lane-number')).to_have_text("run 2")
    operator_page.goto(f"{base}/executions/{execution.pk}/events/{last}/")
    expect(operator_page.locator(".event-nav")).to_contain_text("run 2")
    frame = json.loads(operator_page.locator("pre.raw-event").inner_text())
    assert frame["run_number"] == 2 and frame["run"] == second.pk
    operator_page.goto(f"{base}/runs/{second.pk}/")
    expect(operator_page.locator("h1")).to_contain_text("Run 2")


def test_cancel_asks_first_and_the_tool_it_cut_short_is_marked_interrupted(operator_page, live_stack):
    execution = factories.make_execution(factories.make_thread("Slow tool"), status="running")
    run = factories.make_run(execution, status="running")
    thread_id = execution.thread.thread_id
    factories.append_events(
        run,
        [
            RunStartedEvent(thread_id=thread_id, run_id=run.run_id),
            ToolCallStartEvent(tool_call_id="call-1", tool_call_name="deploy_release"),
            ToolCallArgsEvent(tool_call_id="call-1", delta='{"version": "1.2"}'),
            ToolCallEndEvent(tool_call_id="call-1"),
        ],
    )
    page = operator_page
    page.goto(f"{live_stack.base_url}/executions/{execution.pk}/")
    wait_until_drawn(page, execution)
    questions = []

    def answer(dialog, accept: bool) -> None:
        questions.append(dialog.message)
        dialog.accept() if accept else dialog.dismiss()

    page.once("dialog", lambda dialog: answer(dialog, False))
    page.locator("form.cancel button").click()
    expect(page.locator("form.cancel button")).to_be_visible()
    assert "cannot be undone" in questions[0]
    execution.refresh_from_db()
    assert not execution.cancel_requested

    page.once("dialog", lambda dialog: answer(dialog, True))
    page.locator("form.cancel button").click()
    expect(page.locator(".messages")).to_contain_text("Cancellation requested")
    execution.refresh_from_db()
    assert execution.cancel_requested

    # The worker's cancelled run ends the lane; the call it cut short never returned.
    factories.append_events(
        run, [RunFinishedEvent(thread_id=thread_id, run_id=run.run_id, outcome={"type": "cancelled"})]
    )
    page.reload()
    tool = page.locator(".item-tool")
    expect(tool.locator(".tool-interrupted")).to_have_text("interrupted")
    expect(tool).to_have_class(re.compile(r"\binterrupted\b"))


def test_the_approval_form_lists_calls_in_the_order_the_model_made_them(operator_page, live_stack):
    calls = (
        ToolCallPart("send_payment", {"amount": 1, "to": "a"}, tool_call_id="call-1-0"),
        ToolCallPart("delete_file", {"path": "/b"}, tool_call_id="call-1-1"),
    )
    waiting = suspended_execution(approvals=calls)
    # The tools deferred in the other order: the rows are written as the model's response orders them.
    DeferredRequest.objects.filter(run=waiting.run).delete()
    checkpoint = waiting.execution.thread.selected_checkpoint
    result = _suspended_result(waiting, load(checkpoint), tuple(reversed(calls)))
    runner._deferred_requests(waiting.run, result, checkpoint)
    operator_page.goto(f"{live_stack.base_url}/executions/{waiting.execution.pk}/")
    rows = operator_page.locator(".deferred-request")
    expect(rows).to_have_count(2)
    expect(rows.nth(0)).to_have_attribute("data-call-id", "call-1-0")
    expect(rows.nth(1)).to_have_attribute("data-call-id", "call-1-1")


def _suspended_result(waiting, state, approvals):
    deferred = PendingDeferredCalls.export(NativeDeferredToolRequests(approvals=list(approvals)))
    return HarnessRunResult(
        thread_id=waiting.execution.thread.thread_id,
        run_id=waiting.run.run_id,
        status="suspended",
        state=state,
        suspend_reason="deferred",
        deferred=deferred,
    )
