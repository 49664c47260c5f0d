"""Inside one execution, in Chromium: the timeline's filter (kind, tool, run, text) and its jumps to the next
failure, decision and wait; `/` focuses the filter; cards arriving live obey the filter in force."""

from __future__ import annotations

import re

from ag_ui.core import (
    CustomEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    ToolCallResultEvent,
)
from playwright.sync_api import expect

from runs.services.timeline import DECISION_EVENT_NAME, publish_frames, read_side
from tests.support import factories
from tests.support.timeline_page import text_message_events, tool_call_events, wait_until_drawn

LIVE_MS = 30_000


def _three_runs():
    """A run that waited for an approval, its resume that failed, and the recovery run still under way."""
    execution = factories.make_execution(factories.make_thread("Filtered timeline"), status="running")
    thread_id = execution.thread.thread_id
    first = factories.make_run(execution, status="suspended")
    interrupt = {
        "id": "call-1",
        "toolCallId": "call-1",
        "reason": "approval",
        "metadata": {"tool_name": "lookup_record"},
    }
    factories.append_events(
        first,
        [
            RunStartedEvent(thread_id=thread_id, run_id=first.run_id),
            *text_message_events("m1", "<b>REC-7</b> needs a lookup"),
            *tool_call_events("call-1", "lookup_record", '{"record_id": "REC-7"}'),
            RunFinishedEvent(
                thread_id=thread_id, run_id=first.run_id, outcome={"type": "interrupt", "interrupts": [interrupt]}
            ),
        ],
    )
    second = factories.make_run(execution, reason="resume", previous_run=first, status="failed")
    decision = {
        "decided_by": "op",
        "calls": [{"tool_call_id": "call-1", "tool_name": "lookup_record", "verdict": "approved"}],
    }
    factories.append_events(
        second,
        [
            CustomEvent(name=DECISION_EVENT_NAME, value=decision),
            RunStartedEvent(thread_id=thread_id, run_id=second.run_id),
            ToolCallResultEvent(message_id="call-1:result", tool_call_id="call-1", content='{"id": "REC-7"}'),
            RunErrorEvent(message="The model failed.", code="model_failed"),
        ],
    )
    third = factories.make_run(execution, reason="recovery", previous_run=second, status="running")
    factories.append_events(
        third,
        [
            RunStartedEvent(thread_id=thread_id, run_id=third.run_id),
            *text_message_events("m3", "Recovered; carrying on"),
        ],
    )
    return execution, third


def test_the_timeline_filters_by_kind_tool_run_and_text_and_jumps(operator_page, live_stack):
    execution, recovery = _three_runs()
    page = operator_page
    page.goto(f"{live_stack.base_url}/executions/{execution.pk}/")
    wait_until_drawn(page, execution, 15_000)
    expect(page.locator("#connection")).to_have_attribute("data-state", "live")
    items = page.locator("#timeline article.item")
    text, kind, tool, run = (
        page.locator(f"#timeline-filter [name={name}]") for name in ("text", "kind", "tool", "run")
    )
    status = page.locator("[data-filter-status]")

    # `/` focuses the filter, but not while typing in a field: there it is typed.
    page.locator("body").press("/")
    expect(text).to_be_focused()
    tool.focus()
    page.keyboard.type("/")
    expect(tool).to_have_value("/")
    expect(tool).to_be_focused()
    page.locator("#timeline-filter button[type=reset]").click()

    kind.select_option("tool")
    # The call, and its result in the lane of the run that resumed.
    expect(page.locator(".item-tool")).to_have_count(2)
    expect(page.locator(".item-tool").last).to_be_visible()
    expect(page.locator(".item-message").first).to_be_hidden()
    expect(status).to_have_text("2 of 10 items shown")

    kind.select_option("")
    tool.fill("lookup")
    # The call itself, the wait for its approval and the decision all name the tool.
    for shown in (".item-tool", ".item-interrupt", ".item-decision"):
        expect(page.locator(shown).first).to_be_visible()
    expect(page.locator(".item-error")).to_be_hidden()

    tool.fill("")
    run.select_option(str(recovery.pk))
    expect(status).to_have_text("2 of 10 items shown")
    expect(page.locator(".item-message").nth(1)).to_contain_text("Recovered; carrying on")
    expect(page.locator(".item-message").first).to_be_hidden()

    run.select_option("")
    text.fill("<b>rec-7")
    # Model text is matched and shown as text, never as markup.
    expect(page.locator(".item-message").first).to_be_visible()
    expect(page.locator(".item-message b")).to_have_count(0)
    expect(status).to_have_text("1 of 10 items shown")

    # Cards that arrive live obey the filter in force.
    text.fill("")
    kind.select_option("tool")
    rows = factories.append_events(
        recovery,
        [*tool_call_events("call-2", "notify_team", '{"team": "ops"}'), *text_message_events("m4", "Team notified")],
    )
    publish_frames(execution.pk, [read_side.frame_of(row) for row in rows])
    expect(page.locator(".item-tool", has_text="notify_team")).to_be_visible(timeout=LIVE_MS)
    expect(page.locator(".item-message", has_text="Team notified")).to_be_hidden()
    expect(status).to_have_text("3 of 12 items shown")
    expect(page.locator("#timeline-tools option[value=notify_team]")).to_have_count(1)

    page.locator("#timeline-filter button[type=reset]").click()
    expect(items.filter(has_text="Team notified")).to_be_visible()
    expect(status).to_have_text("")

    for jump, card in (("failure", ".item-error"), ("decision", ".item-decision"), ("wait", ".item-interrupt")):
        page.locator(f"[data-jump={jump}]").click()
        expect(page.locator(card)).to_have_class(re.compile(r"\bhighlight\b"))
        expect(page.locator(card)).to_be_focused()
        expect(status).to_have_text(f"{jump} 1 of 1")
