"""Provenance, in real Chromium: where a fork comes from, the tool names of results inherited from history, and
what each checkpoint holds."""

from __future__ import annotations

import re

import pytest
from ag_ui.core import RunFinishedEvent, RunStartedEvent, ToolCallResultEvent
from playwright.sync_api import expect

from runs.models import Execution, ExecutionStatus, Run, RunStatus
from runs.services.lifecycle import forks
from tests.support import factories
from tests.support.factories import suspended_execution
from tests.support.timeline_page import wait_until_drawn

EXACT = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC$")


@pytest.fixture(autouse=True)
def approval_tools(scenario_tools):
    """Every test here answers requests for the approval scenarios' tools."""


def forked_execution():
    """A fork of a thread suspended on two payments; its first execution returns one of them."""
    waiting = suspended_execution(title="Payments")
    source = waiting.execution.thread.selected_checkpoint
    fork = forks.fork_thread(source, title="Payments, again")
    execution = Execution.objects.create(
        thread=fork,
        number=1,
        input="go on",
        shown_input="go on",
        status=ExecutionStatus.COMPLETED,
        policy_version=waiting.execution.policy_version,
    )
    run = Run.objects.create(
        execution=execution,
        number=1,
        run_id="run-fork-1",
        status=RunStatus.COMPLETED,
        policy_version=execution.policy_version,
        start_checkpoint=fork.selected_checkpoint,
        started_at=factories.START,
    )
    factories.append_events(
        run,
        [
            RunStartedEvent(thread_id=fork.thread_id, run_id=run.run_id),
            ToolCallResultEvent(message_id="call-pay:result", tool_call_id="call-pay", content="sent 5000 to acme"),
            RunFinishedEvent(thread_id=fork.thread_id, run_id=run.run_id, outcome={"type": "success"}),
        ],
    )
    return waiting, source, execution


def expect_origin(page, waiting, source) -> None:
    origin = page.locator(".fork-origin")
    expect(origin).to_contain_text(
        f"Forked from checkpoint #{source.pk} of thread Payments (run 1 of execution #1, at "
    )
    expect(origin.locator("time.when")).to_have_attribute("title", EXACT)
    expect(origin.locator("a.fork-thread")).to_have_attribute("href", f"/threads/{waiting.execution.thread.pk}/")
    expect(origin.locator("a.fork-run")).to_have_attribute("href", f"/runs/{waiting.run.pk}/")


def test_a_fork_and_its_first_execution_say_where_they_come_from(operator_page, live_stack):
    waiting, source, execution = forked_execution()
    page = operator_page
    page.goto(f"{live_stack.base_url}/executions/{execution.pk}/")
    wait_until_drawn(page, execution)
    expect_origin(page, waiting, source)
    # The result of a call made before the fork carries the call's tool name.
    expect(page.locator(".item-tool .item-label")).to_have_text("tool send_payment")

    page.goto(f"{live_stack.base_url}/threads/{execution.thread.pk}/")
    expect_origin(page, waiting, source)
    page.locator(".fork-origin a.fork-checkpoint").click()
    expect(page.locator(f"#checkpoint-{source.pk} .checkpoint-kind")).to_have_text("Terminal")


def test_checkpoints_are_listed_by_kind_time_run_and_contents(operator_page, live_stack):
    waiting = suspended_execution(title="Payments")
    page = operator_page
    page.goto(f"{live_stack.base_url}/threads/{waiting.execution.thread.pk}/")
    terminal = page.locator(f"#checkpoint-{waiting.checkpoint_id}")
    expect(terminal.locator(".checkpoint-kind")).to_have_text("Terminal")
    expect(terminal.locator(".checkpoint-run")).to_have_text("run 1 of execution #1")
    expect(terminal.locator(".checkpoint-contents")).to_have_text("2 messages, 2 pending requests")
    expect(terminal.locator("time.when")).to_have_attribute("title", EXACT)
    initial = page.locator("tr[data-checkpoint]").last
    expect(initial.locator(".checkpoint-contents")).to_have_text("0 messages")
