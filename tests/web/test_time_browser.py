"""Time on the timeline, in real Chromium: tool durations, a running tool's live elapsed time, model latency,
lane wall time and tokens, execution totals, labelled pauses between runs, times with their zone and the one
date format of every page, admin included."""

from __future__ import annotations

import math
import re
import time
from datetime import UTC, datetime, timedelta

from ag_ui.core import (
    CustomEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from playwright.sync_api import expect

from tests.support import factories
from tests.support.browser import log_in
from tests.support.timeline_page import screenshot, wait_until_drawn

T0 = int(factories.START.timestamp() * 1000)
INTERRUPT = {"id": "call-9", "toolCallId": "call-9", "reason": "approval", "metadata": {"tool_name": "deploy"}}
EXACT = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d{3})? UTC$")


def lifecycle(kind: str, at: int) -> CustomEvent:
    value = {"event": {"kind": "lifecycle", "payload": {"type": kind}}}
    return CustomEvent(name="a13n.harness.lifecycle", value=value, timestamp=at)


def tool_call(call_id: str, name: str, start: int, end: int) -> list:
    return [
        ToolCallStartEvent(tool_call_id=call_id, tool_call_name=name, timestamp=start),
        ToolCallArgsEvent(tool_call_id=call_id, delta='{"record_id": "REC-7"}', timestamp=start),
        ToolCallEndEvent(tool_call_id=call_id, timestamp=end),
    ]


def approved_and_resumed_execution():
    """A run that suspends 3 s in, an answer 150 s later, and the resuming run 2 s after the answer."""
    execution = factories.make_execution(factories.make_thread("Timed"), status="completed")
    thread_id = execution.thread.thread_id
    first = factories.make_run(
        execution,
        status="suspended",
        finished_at=factories.START + timedelta(seconds=3),
        usage={"input_tokens": 100, "output_tokens": 20},
    )
    factories.append_events(
        first,
        [
            RunStartedEvent(thread_id=thread_id, run_id=first.run_id, timestamp=T0),
            lifecycle("model_request_started", T0 + 100),
            *tool_call("call-1", "lookup_record", T0 + 1300, T0 + 1400),
            lifecycle("model_request_completed", T0 + 2100),
            ToolCallResultEvent(message_id="call-1:result", tool_call_id="call-1", content="ok", timestamp=T0 + 2900),
            RunFinishedEvent(
                thread_id=thread_id,
                run_id=first.run_id,
                outcome={"type": "interrupt", "interrupts": [INTERRUPT]},
                timestamp=T0 + 3000,
            ),
            CustomEvent(
                name="a13n.host.decision",
                value={"decided_by": "op", "calls": [], "resume_run": 2},
                timestamp=T0 + 153_000,
            ),
        ],
    )
    second = factories.make_run(
        execution,
        reason="resume",
        previous_run=first,
        status="completed",
        started_at=factories.START + timedelta(seconds=155),
        finished_at=factories.START + timedelta(seconds=160),
        usage={"input_tokens": 50, "output_tokens": 5},
    )
    factories.append_events(
        second,
        [
            RunStartedEvent(thread_id=thread_id, run_id=second.run_id, timestamp=T0 + 155_000),
            TextMessageStartEvent(message_id="t1", role="assistant", timestamp=T0 + 156_000),
            TextMessageContentEvent(message_id="t1", delta="Done.", timestamp=T0 + 156_000),
            TextMessageEndEvent(message_id="t1", timestamp=T0 + 156_500),
            RunFinishedEvent(
                thread_id=thread_id, run_id=second.run_id, outcome={"type": "success"}, timestamp=T0 + 160_000
            ),
        ],
    )
    return execution, first, second


def test_durations_latency_tokens_totals_and_pauses_between_runs(operator_page, live_stack):
    execution, first, second = approved_and_resumed_execution()
    page = operator_page
    page.goto(f"{live_stack.base_url}/executions/{execution.pk}/")
    wait_until_drawn(page, execution)
    tool = page.locator(".item-tool")
    expect(tool.locator(".tool-duration")).to_have_text("took 1.5 s")
    expect(tool.locator(".model-latency")).to_have_text("model: first part after 1.2 s, response in 2.0 s")
    # Times on the axis count from the first event; the exact time, zone named, is on hover.
    expect(tool.locator(".item-time")).to_have_text("+1.3 s")
    expect(tool.locator(".item-time")).to_have_attribute("title", EXACT)
    gaps = page.locator(".time-gap")
    expect(gaps).to_have_count(2)
    expect(gaps.nth(0)).to_have_text("2 min 30 s · waiting for approval")
    expect(gaps.nth(1)).to_have_text("2.0 s · from the answer to the resuming run")
    expect(page.locator(f'.lane-head[data-run="{first.pk}"] .lane-tokens')).to_have_text("100 in · 20 out tokens")
    expect(page.locator(f'.lane-head[data-run="{second.pk}"] .lane-duration')).to_have_text("5.0 s")
    expect(page.locator("#execution-totals")).to_have_text(
        "2 runs · active 8.0 s · wall 2 min 40 s (waited 2 min 32 s) · 150 in · 25 out tokens"
    )
    screenshot(page, "timeline-time.png")


def test_lanes_stand_on_one_time_axis_and_a_long_wait_is_compressed_but_labelled(operator_page, live_stack):
    execution, first, second = approved_and_resumed_execution()
    page = operator_page
    page.goto(f"{live_stack.base_url}/executions/{execution.pk}/")
    wait_until_drawn(page, execution)
    axis = page.locator("#time-axis")
    expect(axis).to_be_visible()
    # Runs of 3 s and 5 s and the 2 s before the resume to scale; the 150 s wait for approval is longer than the
    # 5 s cap, so it is drawn 5 s × (1 + ln(150 / 5)) long.
    approval_shown = 5 * (1 + math.log(150 / 5))
    total = 3 + approval_shown + 2 + 5

    def place(start: float, length: float) -> str:
        return f"left: {percent(start / total)}; width: {percent(length / total)};"

    run_one = axis.locator(f'.axis-run[data-run="{first.pk}"]')
    expect(run_one.locator(".axis-label")).to_have_text("run 1 · initial 3.0 s")
    expect(run_one.locator(".axis-bar")).to_have_attribute("style", place(0, 3))
    run_two = axis.locator(f'.axis-run[data-run="{second.pk}"]')
    expect(run_two.locator(".axis-label")).to_have_text("run 2 · resume 5.0 s")
    expect(run_two.locator(".axis-bar")).to_have_attribute("style", place(5 + approval_shown, 5))
    first_item = execution.timeline.filter(run=second).order_by("position").first().position
    expect(run_two.locator("a.axis-label")).to_have_attribute("href", f"#pos-{first_item}")
    waits = axis.locator(".axis-wait")
    expect(waits).to_have_count(2)
    approval, answer = waits.nth(0), waits.nth(1)
    expect(approval).to_have_class(re.compile(r"\bcompressed\b"))
    expect(approval.locator(".axis-label")).to_have_text("waiting for approval 2 min 30 s not to scale")
    expect(approval.locator(".axis-break")).to_have_text("≈")
    expect(approval.locator(".axis-bar")).to_have_attribute("style", place(3, approval_shown))
    expect(answer).not_to_have_class(re.compile(r"\bcompressed\b"))
    expect(answer.locator(".axis-label")).to_have_text("from the answer to the resuming run 2.0 s")
    expect(answer.locator(".axis-bar")).to_have_attribute("style", place(3 + approval_shown, 2))
    # The ruler counts from the first event; past the break it goes on at the true time.
    ticks = axis.locator(".axis-ruler .axis-tick")
    expect(ticks.first).to_have_text("0 s")
    expect(ticks.first).to_have_attribute("title", EXACT)
    expect(ticks.filter(has_text=re.compile(r"^2 min 33 s$"))).to_have_count(1)
    expect(ticks.last).to_have_text("2 min 40 s")
    expect(axis.locator(".axis-ruler .axis-squeeze")).to_have_text("≈")
    run_two.locator("a.axis-label").click()
    expect(page.locator(f"#pos-{first_item}")).to_have_class(re.compile(r"\bhighlight\b"))


def test_a_dead_run_s_wait_is_split_into_lease_expired_and_recovery(operator_page, live_stack):
    execution = factories.make_execution(factories.make_thread("Crashed"), status="completed")
    thread_id = execution.thread.thread_id
    dead = factories.make_run(execution, status="abandoned", finished_at=factories.START + timedelta(seconds=32))
    factories.append_events(
        dead,
        [
            RunStartedEvent(thread_id=thread_id, run_id=dead.run_id, timestamp=T0),
            *tool_call("call-1", "lookup_record", T0 + 500, T0 + 600),
            # The sweeper closes the dead run's lane after its lease expired.
            RunErrorEvent(message="The worker stopped.", code="worker_lost", timestamp=T0 + 32_500),
        ],
    )
    recovery = factories.make_run(
        execution,
        reason="recovery",
        previous_run=dead,
        status="completed",
        started_at=factories.START + timedelta(seconds=34),
        finished_at=factories.START + timedelta(seconds=36),
    )
    factories.append_events(
        recovery,
        [
            RunStartedEvent(thread_id=thread_id, run_id=recovery.run_id, timestamp=T0 + 34_000),
            RunFinishedEvent(
                thread_id=thread_id, run_id=recovery.run_id, outcome={"type": "success"}, timestamp=T0 + 36_000
            ),
        ],
    )
    page = operator_page
    page.goto(f"{live_stack.base_url}/executions/{execution.pk}/")
    wait_until_drawn(page, execution)
    axis = page.locator("#time-axis")
    # The dead run ran until its last event, not until its lane was closed.
    expect(axis.locator(f'.axis-run[data-run="{dead.pk}"] .axis-label')).to_have_text("run 1 · initial 0.6 s")
    waits = axis.locator(".axis-wait")
    expect(waits).to_have_count(2)
    expect(waits.nth(0).locator(".axis-label")).to_have_text("lease expired 31.4 s not to scale")
    expect(waits.nth(1).locator(".axis-label")).to_have_text("recovery 2.0 s")
    expect(axis.locator(f'.axis-run[data-run="{recovery.pk}"] .axis-label')).to_have_text("run 2 · recovery 2.0 s")
    screenshot(page, "timeline-axis-recovery.png")


def test_a_wait_for_approval_under_way_grows_on_the_axis(operator_page, live_stack):
    execution = factories.make_execution(factories.make_thread("Waiting"), status="waiting")
    now = int(time.time() * 1000)
    # The run's row says when it ran, as the worker writes it; the wait counts from its end.
    run = factories.make_run(
        execution,
        status="suspended",
        started_at=datetime.fromtimestamp((now - 4000) / 1000, tz=UTC),
        finished_at=datetime.fromtimestamp((now - 3000) / 1000, tz=UTC),
    )
    factories.append_events(
        run,
        [
            RunStartedEvent(thread_id=execution.thread.thread_id, run_id=run.run_id, timestamp=now - 4000),
            RunFinishedEvent(
                thread_id=execution.thread.thread_id,
                run_id=run.run_id,
                outcome={"type": "interrupt", "interrupts": [INTERRUPT]},
                timestamp=now - 3000,
            ),
        ],
    )
    page = operator_page
    page.goto(f"{live_stack.base_url}/executions/{execution.pk}/")
    wait_until_drawn(page, execution)
    wait = page.locator("#time-axis .axis-wait")
    expect(wait).to_have_class(re.compile(r"\bopen\b"))
    length = wait.locator(".axis-length")
    expect(length).to_have_text(re.compile(r"^\d+\.\d s so far$"))
    seen = length.inner_text()
    expect(length).not_to_have_text(seen)
    expect(wait.locator(".axis-cause")).to_have_text("waiting for approval")
    # The header's wall time ticks with the wait; the run's active time does not.
    totals = page.locator("#execution-totals")
    expect(totals).to_contain_text("active 1.0 s")
    seen = totals.inner_text()
    expect(totals).not_to_have_text(seen)
    expect(totals).to_contain_text("active 1.0 s")


def percent(fraction: float) -> str:
    """A share as the axis writes it into a style (three decimals, trailing zeros dropped by the browser)."""
    return f"{fraction * 100:.3f}".rstrip("0").rstrip(".") + "%"


def test_a_running_tool_is_busy_and_its_elapsed_time_increases(operator_page, live_stack):
    execution = factories.make_execution(factories.make_thread("Slow tool"), status="running")
    run = factories.make_run(execution, status="running")
    now = int(time.time() * 1000)
    factories.append_events(
        run,
        [
            RunStartedEvent(thread_id=execution.thread.thread_id, run_id=run.run_id, timestamp=now - 2000),
            *tool_call("call-1", "slow_step", now - 1500, now - 1000),
        ],
    )
    page = operator_page
    page.goto(f"{live_stack.base_url}/executions/{execution.pk}/")
    wait_until_drawn(page, execution)
    tool = page.locator(".item-tool")
    expect(tool).to_have_attribute("aria-busy", "true")
    elapsed = tool.locator(".tool-elapsed")
    expect(elapsed).to_have_text(re.compile(r"^running \d+\.\d s$"))
    first = int(elapsed.get_attribute("data-elapsed-ms"))
    page.wait_for_function(
        "(first) => Number(document.querySelector('.item-tool .tool-elapsed').dataset.elapsedMs) > first + 1000",
        arg=first,
    )


def test_pages_say_times_with_their_zone_relative_with_the_exact_time_on_hover(operator_page, live_stack):
    execution = factories.make_execution(factories.make_thread("Dated"), status="completed")
    page = operator_page
    page.goto(f"{live_stack.base_url}/threads/{execution.thread.pk}/")
    created = page.locator(".facts time.when").first
    expect(created).to_have_text(re.compile(r"(ago|just now)$"))
    expect(created).to_have_attribute("title", EXACT)


def test_admin_uses_the_same_date_format(live_stack, django_user_model, page):
    factories.policy_version()
    django_user_model.objects.create_superuser("boss", password="boss-password-1")
    log_in(page, live_stack.base_url, "boss", "boss-password-1")
    page.goto(f"{live_stack.base_url}/admin/runs/hostpolicyversion/")
    cell = page.locator("td.field-created_at").first
    expect(cell).to_have_text(EXACT)
