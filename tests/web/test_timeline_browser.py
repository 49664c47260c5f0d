"""The execution timeline in real Chromium against daphne + Redis, on timelines written straight into the database.

Live runs through the RQ worker are in test_live_timeline_browser.py; these cover rendering: lanes side by side,
nested child lanes, escaping, permalinks and large executions.
"""

from __future__ import annotations

import json
import re

from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    StepStartedEvent,
    SubagentFinishedEvent,
    SubagentStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    TokenUsage,
    ToolCallResultEvent,
)
from playwright.sync_api import expect

from observers.agui import fragment_custom_event
from tests.support import factories
from tests.support.timeline_page import dom_positions, screenshot, tool_call_events, wait_until_drawn


def open_execution(page, base_url: str, execution, fragment: str = "", timeout: float = 15_000) -> None:
    page.goto(f"{base_url}/executions/{execution.pk}/{fragment}")
    wait_until_drawn(page, execution, timeout)
    page.wait_for_selector('#connection[data-state="live"]', timeout=timeout)


def crashed_and_recovered_execution():
    """A first run that died mid-answer and the recovery run that finished the work."""
    execution = factories.make_execution(factories.make_thread("Recovered after a crash"), status="completed")
    thread_id = execution.thread.thread_id
    first = factories.make_run(execution, status="abandoned")
    factories.append_events(
        first,
        [
            RunStartedEvent(thread_id=thread_id, run_id=first.run_id),
            ReasoningMessageStartEvent(message_id="r1", role="reasoning"),
            ReasoningMessageContentEvent(message_id="r1", delta="The user wants REC-7; "),
            ReasoningMessageContentEvent(message_id="r1", delta="look it up first."),
            ReasoningMessageEndEvent(message_id="r1"),
            *tool_call_events("call-1", "lookup_record", '{"record_id": "REC-7"}'),
            ToolCallResultEvent(message_id="call-1:result", tool_call_id="call-1", content='{"id": "REC-7"}'),
            TextMessageStartEvent(message_id="t1", role="assistant"),
            TextMessageContentEvent(message_id="t1", delta="Record REC-7 is "),
        ],
    )
    second = factories.make_run(execution, reason="recovery", previous_run=first, status="completed")
    factories.append_events(
        second,
        [
            RunStartedEvent(thread_id=thread_id, run_id=second.run_id),
            CustomEvent(name="a13n.harness.lifecycle", value={"type": "model_request_started"}),
            CustomEvent(name="a13n.harness.lifecycle", value={"type": "model_request_completed"}),
            TextMessageStartEvent(message_id="t2", role="assistant"),
            *[TextMessageContentEvent(message_id="t2", delta=part) for part in ["Record ", "REC-7 ", "is active."]],
            TextMessageEndEvent(message_id="t2"),
            RunFinishedEvent(
                thread_id=thread_id,
                run_id=second.run_id,
                outcome={"type": "success"},
                result="Record REC-7 is active.",
                usage=[TokenUsage(input_tokens=120, output_tokens=30, total_tokens=150)],
            ),
        ],
    )
    return execution, first, second


def test_a_recovery_run_is_a_second_lane_beside_the_first(operator_page, live_stack):
    execution, first, _ = crashed_and_recovered_execution()
    open_execution(operator_page, live_stack.base_url, execution)
    heads = operator_page.locator(".lane-head")
    expect(heads).to_have_count(2)
    expect(heads.nth(0).locator(".lane-run")).to_have_text(first.run_id)
    expect(heads.nth(1).locator(".lane-reason")).to_have_text(re.compile("recovery", re.IGNORECASE))
    expect(heads.nth(0).locator(".lane-status")).to_have_text("abandoned")

    first_lane_item = operator_page.locator("#pos-1").bounding_box()
    second_lane_item = operator_page.locator("#pos-12").bounding_box()
    last_of_first = operator_page.locator("#pos-10").bounding_box()
    # Side by side: the recovery run's column is to the right; aligned in time: it starts below the first run's end.
    assert second_lane_item["x"] > first_lane_item["x"] + first_lane_item["width"] - 1
    assert second_lane_item["y"] > last_of_first["y"]

    # Deltas fold into one message; reasoning is collapsed; CUSTOM events fold into one group.
    expect(operator_page.locator(".item-message")).to_have_count(2)
    expect(operator_page.locator(".item-message").nth(1).locator(".message-text")).to_have_text(
        "Record REC-7 is active."
    )
    expect(operator_page.locator("details.reasoning")).to_have_count(1)
    expect(operator_page.locator("details.reasoning[open]")).to_have_count(0)
    expect(operator_page.locator(".item-group summary")).to_have_text("2 harness events: run lifecycle")
    expect(operator_page.locator(".item-tool .tool-result pre")).to_contain_text('"id": "REC-7"')
    expect(operator_page.locator(".item-finished .usage")).to_contain_text("in 120")
    assert dom_positions(operator_page) == list(range(1, 21))
    screenshot(operator_page, "side-by-side-lanes.png")


def test_a_child_run_is_a_nested_lane_under_its_tool_call_events(operator_page, live_stack):
    execution = factories.make_execution(factories.make_thread("Delegation"), status="completed")
    run = factories.make_run(execution, status="completed")
    child = "run-child-researcher"
    thread_id = execution.thread.thread_id
    factories.append_events(
        run,
        [
            RunStartedEvent(thread_id=thread_id, run_id=run.run_id),
            *tool_call_events("call-d", "delegate_to_researcher", '{"task": "find REC-9"}'),
            SubagentStartedEvent(subagent_run_id=child, name="researcher", parent_tool_call_id="call-d"),
            TextMessageStartEvent(message_id="c1", role="assistant", subagent_run_id=child),
            TextMessageContentEvent(message_id="c1", delta="Child found REC-9.", subagent_run_id=child),
            TextMessageEndEvent(message_id="c1", subagent_run_id=child),
            SubagentFinishedEvent(subagent_run_id=child, outcome={"type": "success"}),
            ToolCallResultEvent(message_id="call-d:result", tool_call_id="call-d", content="REC-9 summary"),
            RunErrorEvent(message="model provider unavailable", code="model_http_error"),
        ],
    )
    open_execution(operator_page, live_stack.base_url, execution)
    nested = operator_page.locator(".item-tool .tool-children .item-subagent")
    expect(nested).to_have_count(1)
    expect(nested.locator(".item-extra").first).to_contain_text(child)
    expect(nested.locator(".badge").first).to_have_text("completed")
    expect(nested.locator(".item-message .message-text")).to_have_text("Child found REC-9.")
    # The child's message is not in the parent's own column.
    expect(operator_page.locator("#timeline > .item-message")).to_have_count(0)
    expect(operator_page.locator(".item-error")).to_contain_text("model provider unavailable")
    screenshot(operator_page, "nested-child-lane.png")


def test_model_and_tool_text_is_shown_as_text_never_as_html(operator_page, live_stack):
    execution = factories.make_execution(factories.make_thread("Hostile output"), status="completed")
    run = factories.make_run(execution, status="completed")
    payload = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2"><b>bold</b>'
    factories.append_events(
        run,
        [
            RunStartedEvent(thread_id=execution.thread.thread_id, run_id=run.run_id),
            *tool_call_events("call-x", "<b>tool</b>", '{"q": "<i>x</i>"}'),
            ToolCallResultEvent(message_id="call-x:result", tool_call_id="call-x", content=payload),
            TextMessageStartEvent(message_id="t", role="assistant"),
            TextMessageContentEvent(message_id="t", delta=payload),
            TextMessageEndEvent(message_id="t"),
            CustomEvent(name="<b>custom</b>", value={"html": payload}),
        ],
    )
    open_execution(operator_page, live_stack.base_url, execution)
    operator_page.locator("#internal-toggle").click()
    operator_page.locator(".item-group summary").click()
    expect(operator_page.locator(".item-group .group-row pre")).to_contain_text("<script>")
    expect(operator_page.locator(".item-tool .tool-result pre")).to_have_text(payload)
    expect(operator_page.locator(".item-message .message-text")).to_have_text(payload)
    expect(operator_page.locator(".item-tool .item-label")).to_have_text("tool <b>tool</b>")
    expect(operator_page.locator("#timeline script, #timeline img, #timeline b, #timeline i")).to_have_count(0)
    assert operator_page.evaluate("() => window.__pwned") is None


def test_a_permalink_scrolls_to_its_event_and_highlights_it(operator_page, live_stack):
    execution = factories.make_execution(factories.make_thread("Long answer"), status="completed")
    run = factories.make_run(execution, status="completed")
    events = [RunStartedEvent(thread_id=execution.thread.thread_id, run_id=run.run_id)]
    for n in range(60):
        events += tool_call_events(f"call-{n}", "lookup_record", f'{{"record_id": "REC-{n}"}}')
    factories.append_events(run, events)
    # Position 153 is the TOOL_CALL_ARGS of call-50: its item is that tool call's card.
    open_execution(operator_page, live_stack.base_url, execution, "#pos-153")
    highlighted = operator_page.locator(".highlight")
    expect(highlighted).to_have_count(1)
    expect(highlighted).to_have_id("pos-152")
    expect(highlighted.locator(".item-extra")).to_contain_text("call-50")
    expect(highlighted).to_be_visible()
    operator_page.wait_for_function(
        "() => { const r = document.querySelector('.highlight').getBoundingClientRect();"
        " return r.top >= 0 && r.bottom <= window.innerHeight; }"
    )
    # The raw view of an event links back to this permalink.
    operator_page.goto(f"{live_stack.base_url}/executions/{execution.pk}/events/153/")
    expect(operator_page.locator("pre.raw-event")).to_contain_text("TOOL_CALL_ARGS")
    operator_page.click("text=Show in timeline")
    expect(operator_page.locator(".highlight")).to_have_id("pos-152")


def large_execution(target_events: int = 20_000):
    """Steps of reasoning, streamed text, harness facts and a tool call, like a long agent session."""
    execution = factories.make_execution(factories.make_thread("Twenty thousand events"), status="completed")
    run = factories.make_run(execution, status="completed")
    events: list[BaseEvent] = [RunStartedEvent(thread_id=execution.thread.thread_id, run_id=run.run_id)]
    step = 0
    while len(events) < target_events - 1:
        r, t, c = f"r{step}", f"t{step}", f"call-{step}"
        events.append(ReasoningMessageStartEvent(message_id=r, role="reasoning"))
        events += [ReasoningMessageContentEvent(message_id=r, delta=f"thought {n} ") for n in range(10)]
        events.append(ReasoningMessageEndEvent(message_id=r))
        events.append(TextMessageStartEvent(message_id=t, role="assistant"))
        events += [TextMessageContentEvent(message_id=t, delta=f"word{n} ") for n in range(10)]
        events.append(TextMessageEndEvent(message_id=t))
        events += [CustomEvent(name="a13n.harness.lifecycle", value={"step": step, "n": n}) for n in range(3)]
        events += tool_call_events(c, "lookup_record", f'{{"record_id": "REC-{step}"}}')
        events.append(ToolCallResultEvent(message_id=f"{c}:result", tool_call_id=c, content=f"record {step}"))
        step += 1
    events = events[: target_events - 1]
    thread_id = execution.thread.thread_id
    events.append(RunFinishedEvent(thread_id=thread_id, run_id=run.run_id, outcome={"type": "success"}))
    factories.append_events(run, events)
    return execution


def test_a_twenty_thousand_event_execution_opens_and_scrolls(operator_page, live_stack):
    execution = large_execution()
    open_execution(operator_page, live_stack.base_url, execution, timeout=120_000)
    assert dom_positions(operator_page) == list(range(1, 20_001))
    # Deltas and harness facts are folded: far fewer elements than events.
    items = operator_page.locator("#timeline > .item").count()
    assert items < 3_000
    operator_page.mouse.wheel(0, 200_000)
    operator_page.locator(".item-finished").scroll_into_view_if_needed()
    expect(operator_page.locator(".item-finished")).to_be_in_viewport()
    # A permalink deep in the run, opened fresh, lands on its event once the replay reaches it.
    operator_page.goto(f"{live_stack.base_url}/threads/{execution.thread_id}/")
    operator_page.goto(f"{live_stack.base_url}/executions/{execution.pk}/#pos-19000")
    # 19000 is a harness CUSTOM event: its collapsed group opens and the row itself is highlighted.
    highlighted = operator_page.locator(".highlight")
    expect(highlighted).to_have_attribute("data-pos", "19000", timeout=120_000)
    expect(highlighted).to_contain_text("a13n.harness.lifecycle")
    expect(highlighted).to_be_visible()


def test_interrupts_cancellations_and_other_events_have_their_own_cards(operator_page, live_stack):
    execution = factories.make_execution(factories.make_thread("Deploy, then cancelled"), status="cancelled")
    thread_id = execution.thread.thread_id
    first = factories.make_run(execution, status="suspended")
    interrupt = {
        "id": "call-9",
        "toolCallId": "call-9",
        "reason": "approval",
        "metadata": {"tool_name": "deploy_release", "args": {"version": "1.4.2"}},
    }
    factories.append_events(
        first,
        [
            RunStartedEvent(thread_id=thread_id, run_id=first.run_id),
            *tool_call_events("call-9", "deploy_release", '{"version": "1.4.2"}'),
            RunFinishedEvent(
                thread_id=thread_id, run_id=first.run_id, outcome={"type": "interrupt", "interrupts": [interrupt]}
            ),
        ],
    )
    second = factories.make_run(execution, reason="resume", previous_run=first, status="cancelled")
    factories.append_events(
        second,
        [
            RunStartedEvent(thread_id=thread_id, run_id=second.run_id),
            StepStartedEvent(step_name="an event this page has no card for"),
            RunFinishedEvent(thread_id=thread_id, run_id=second.run_id, outcome={"type": "cancelled"}),
        ],
    )
    open_execution(operator_page, live_stack.base_url, execution)
    card = operator_page.locator(".item-interrupt .interrupt-card")
    expect(card.locator(".interrupt-title")).to_have_text("waiting for approval: deploy_release")
    expect(card.locator("pre")).to_contain_text('"version": "1.4.2"')
    # The execution was cancelled: nothing can be answered any more, so the card links to no form.
    expect(card.locator(".interrupt-closed")).to_have_text("no longer open")
    expect(card.locator("a.interrupt-link")).to_have_count(0)
    expect(operator_page.locator(".lane-head").nth(1).locator(".lane-reason")).to_have_text(
        re.compile("resume", re.IGNORECASE)
    )
    expect(operator_page.locator(".item-cancelled .item-label")).to_have_text("run cancelled")
    generic = operator_page.locator(".item-generic")
    expect(generic.locator(".item-label")).to_have_text("STEP_STARTED")
    expect(generic.locator("pre")).to_contain_text("an event this page has no card for")
    expect(operator_page.locator("#execution-status")).to_have_text("cancelled")


def test_a_cursor_the_server_rejects_makes_the_page_start_over(operator_page, live_stack):
    execution = factories.make_execution(factories.make_thread("Restored from a backup"), status="completed")
    run = factories.make_run(execution, status="completed")
    factories.append_events(run, factories.text_run_events(run, ["one ", "two ", "three ", "four ", "five "]))
    open_execution(operator_page, live_stack.base_url, execution)
    assert dom_positions(operator_page) == list(range(1, 10))
    # The database lost the tail (say, restored from an older backup) while the page was away.
    execution.timeline.filter(position__gt=5).delete()
    live_stack.restart_daphne()
    operator_page.wait_for_function("() => window.harnessTimeline.subscriptions.length === 3")
    wait_until_drawn(operator_page, execution)
    expect(operator_page.locator("#connection")).to_have_attribute("data-state", "live")
    assert operator_page.evaluate("() => window.harnessTimeline.subscriptions") == [None, 9, None]
    assert dom_positions(operator_page) == [1, 2, 3, 4, 5]
    expect(operator_page.locator(".item-message .message-text")).to_have_text("one two three ")


def test_an_oversized_custom_event_is_shown_reassembled_from_its_fragments(operator_page, live_stack):
    execution = factories.make_execution(factories.make_thread("Big context snapshot"), status="completed")
    run = factories.make_run(execution, status="completed")
    snapshot = "line of context <b>not bold</b>\n" * 2000
    big = CustomEvent(name="a13n.harness.context", value={"type": "context_snapshot", "text": snapshot})
    fragments = fragment_custom_event(big, "frag-1")
    assert len(fragments) > 10
    factories.append_events(run, [RunStartedEvent(thread_id=execution.thread.thread_id, run_id=run.run_id), *fragments])
    open_execution(operator_page, live_stack.base_url, execution)
    group = operator_page.locator(".item-group")
    expect(group.locator("summary")).to_have_text(f"{len(fragments)} harness events: run context")
    operator_page.locator("#internal-toggle").click()
    group.locator("summary").click()
    # The rows are drawn by the <details> toggle handler, which fires after the click returns.
    rows = group.locator(".group-row")
    expect(rows).to_have_count(1)
    expect(rows.locator(".group-name")).to_have_text(f"run context (reassembled from {len(fragments)} fragments)")
    expect(rows.locator(".group-raw-name")).to_have_text("a13n.harness.context")
    assert json.loads(rows.locator("pre").inner_text()) == big.value
    assert dom_positions(operator_page) == list(range(1, len(fragments) + 2))
