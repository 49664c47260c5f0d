"""Failures explained, in real Chromium: code, exception, message, a provider's status and code, the run's
attempt and tool-recovery mode, on the failure card and on the run page."""

from __future__ import annotations

from ag_ui.core import RunErrorEvent, RunStartedEvent, ToolCallArgsEvent, ToolCallEndEvent, ToolCallStartEvent
from playwright.sync_api import expect

from tests.support import factories
from tests.support.timeline_page import wait_until_drawn

DETAILS = {
    "error_type": "ModelRateLimitError",
    "model_name": "gpt-test",
    "status_code": 429,
    "provider_error_code": "rate_limit_exceeded",
}


def rate_limited_execution():
    execution = factories.make_execution(factories.make_thread("Rate limited"), status="failed")
    run = factories.make_run(
        execution,
        status="failed",
        attempt=2,
        tool_recovery="retry_safe",
        failure_code="model_rate_limited",
        failure_message="The model provider is rate-limiting requests (HTTP 429).",
    )
    thread_id = execution.thread.thread_id
    factories.append_events(
        run,
        [
            RunStartedEvent(thread_id=thread_id, run_id=run.run_id),
            ToolCallStartEvent(tool_call_id="call-1", tool_call_name="lookup_record"),
            ToolCallArgsEvent(tool_call_id="call-1", delta="{}"),
            ToolCallEndEvent(tool_call_id="call-1"),
            RunErrorEvent(
                code="model_rate_limited",
                message="The model provider is rate-limiting requests (HTTP 429).",
                raw_event={"failure": {"code": "model_rate_limited", "details": DETAILS}},
            ),
        ],
    )
    return execution, run


def expect_failure_facts(facts) -> None:
    expect(facts.locator(".failure-code")).to_have_text("model_rate_limited")
    expect(facts.locator(".failure-type")).to_have_text("ModelRateLimitError")
    expect(facts.locator(".failure-status")).to_have_text("429")
    expect(facts.locator(".failure-provider-code")).to_have_text("rate_limit_exceeded")
    expect(facts.locator(".failure-attempt")).to_have_text("2 · tool recovery retry_safe")


def test_the_failure_card_and_the_run_page_say_why_the_run_failed(operator_page, live_stack):
    execution, run = rate_limited_execution()
    page = operator_page
    page.goto(f"{live_stack.base_url}/executions/{execution.pk}/")
    wait_until_drawn(page, execution)
    card = page.locator(".item-error")
    expect(card.locator(".error-message")).to_have_text("The model provider is rate-limiting requests (HTTP 429).")
    expect_failure_facts(card)
    expect(card.locator(".failure-body-note")).to_contain_text("response body is not stored")
    # The call the failure cut short never returned.
    expect(page.locator(".item-tool .tool-interrupted")).to_have_text("interrupted")

    page.goto(f"{live_stack.base_url}/runs/{run.pk}/")
    expect_failure_facts(page.locator(".facts .failure"))
    expect(page.locator(".failure-message")).to_contain_text("rate-limiting")
    expect(page.locator(".failure-body-note")).to_be_visible()


def test_the_execution_page_names_the_failed_run_and_its_cause(operator_page, live_stack):
    execution, _ = rate_limited_execution()
    operator_page.goto(f"{live_stack.base_url}/executions/{execution.pk}/")
    failure = operator_page.locator(".facts .failure")
    expect(failure).to_contain_text("run 1")
    expect_failure_facts(failure)
