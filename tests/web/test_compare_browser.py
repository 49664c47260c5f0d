"""Compare lanes, in real Chromium: two runs of one execution lined up step by step, the first divergence
marked."""

from __future__ import annotations

from ag_ui.core import (
    CustomEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    ToolCallResultEvent,
)
from playwright.sync_api import expect

from tests.support import factories
from tests.support.timeline_page import screenshot, text_message_events, tool_call_events, wait_until_drawn


def tool(call_id: str, name: str, args: str, result: str) -> list:
    return [
        *tool_call_events(call_id, name, args),
        ToolCallResultEvent(message_id=f"{call_id}:result", tool_call_id=call_id, content=result),
    ]


def failed_then_recovered():
    """The first run looks up REC-7 and dies; the recovery run looks it up again, then searches differently."""
    execution = factories.make_execution(factories.make_thread("Compared"), status="completed")
    thread_id = execution.thread.thread_id
    first = factories.make_run(execution, status="failed", failure_code="worker_lost")
    factories.append_events(
        first,
        [
            RunStartedEvent(thread_id=thread_id, run_id=first.run_id),
            CustomEvent(name="a13n.harness.lifecycle", value={"type": "model_request_started"}),
            *tool("call-1", "lookup_record", '{"record_id": "REC-7"}', '{"id": "REC-7"}'),
            *tool("call-2", "search_records", '{"query": "acme"}', "[]"),
            RunErrorEvent(code="worker_lost", message="The worker stopped."),
        ],
    )
    second = factories.make_run(execution, reason="recovery", previous_run=first, status="completed")
    factories.append_events(
        second,
        [
            RunStartedEvent(thread_id=thread_id, run_id=second.run_id),
            *tool("call-1", "lookup_record", '{"record_id": "REC-7"}', '{"id": "REC-7"}'),
            *tool("call-2", "search_records", '{"query": "acme corp"}', "[]"),
            *text_message_events("t1", "Found nothing."),
            RunFinishedEvent(thread_id=thread_id, run_id=second.run_id, outcome={"type": "success"}),
        ],
    )
    return execution, first, second


def test_two_lanes_line_up_and_the_first_divergence_is_marked(operator_page, live_stack):
    execution, first, second = failed_then_recovered()
    page = operator_page
    page.goto(f"{live_stack.base_url}/executions/{execution.pk}/")
    wait_until_drawn(page, execution)
    compare = page.locator("#compare")
    expect(compare).to_be_hidden()
    page.locator("#compare-toggle").click()
    expect(compare).to_be_visible()
    expect(compare.locator("select[name=left]")).to_have_value(str(first.pk))
    expect(compare.locator("select[name=right]")).to_have_value(str(second.pk))
    rows = compare.locator(".compare-rows tr")
    # run started, lookup, search, then the end of the first run beside the recovery's answer and end; the
    # harness event group is left out.
    expect(rows).to_have_count(5)
    expect(rows.nth(1)).to_have_class("same")
    divergence = compare.locator("tr.first-divergence")
    expect(divergence).to_have_count(1)
    expect(divergence.locator(".compare-index")).to_have_text("3")
    expect(divergence.locator(".compare-note")).to_have_text("first divergence the arguments differ")
    expect(compare.locator(".compare-verdict")).to_have_text("The runs diverge at step 3.")
    expect(rows.nth(3).locator(".compare-left")).to_have_text("run failed · The worker stopped.")
    expect(rows.nth(3).locator(".compare-note")).to_have_text("an error on the left, a message on the right")
    screenshot(page, "timeline-compare.png")

    # The same run on both sides: nothing diverges.
    compare.locator("select[name=left]").select_option(str(second.pk))
    expect(divergence).to_have_count(0)
    expect(compare.locator(".compare-verdict")).to_have_text("The runs do the same 5 steps.")
    page.locator("#compare-toggle").click()
    expect(compare).to_be_hidden()


def test_a_single_lane_offers_no_comparison(operator_page, live_stack):
    execution = factories.make_execution(factories.make_thread("Alone"), status="completed")
    run = factories.make_run(execution, status="completed")
    factories.append_events(run, factories.text_run_events(run, ["hello"]))
    operator_page.goto(f"{live_stack.base_url}/executions/{execution.pk}/")
    wait_until_drawn(operator_page, execution)
    expect(operator_page.locator("#compare-toggle")).to_be_hidden()
