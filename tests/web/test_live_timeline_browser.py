"""Live demo executions in real Chromium: daphne + RQ worker + Redis, the page fed over the websocket.

Each test compares the positions the page shows with the positions stored in the database: the same set,
each exactly once.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time

import pytest
from playwright.sync_api import expect

from runs.demo_profile import ensure_demo_profile
from runs.models import Execution, TimelineEvent
from runs.services.lifecycle import executions
from runs.services.store import policy
from tests.support.services import ROOT
from tests.support.timeline_page import dom_positions, screenshot, wait_until_drawn

RUN_TIMEOUT_MS = 60_000


@pytest.fixture
def demo_thread(live_stack):
    return executions.create_thread(ensure_demo_profile(), title="Live demo")


def start_from_the_thread_page(page, base_url: str, thread, text: str) -> Execution:
    page.goto(f"{base_url}/threads/{thread.pk}/")
    page.fill("#new-input", text)
    page.click(".new-execution button[type=submit]")
    page.wait_for_url(f"{base_url}/executions/*/")
    return Execution.objects.get(pk=int(page.url.rstrip("/").rsplit("/", 1)[1]))


def wait_for_status(page, status: str) -> None:
    expect(page.locator("#execution-status")).to_have_class(re.compile(rf"\bstatus-{status}\b"), timeout=RUN_TIMEOUT_MS)


def wait_until_everything_is_drawn(page, execution: Execution) -> list[int]:
    return wait_until_drawn(page, execution, RUN_TIMEOUT_MS)


def test_a_demo_execution_appears_live_while_it_runs(operator_page, live_stack, demo_thread):
    execution = start_from_the_thread_page(
        operator_page, live_stack.base_url, demo_thread, "Research the outage, then run a slow step of 5 seconds"
    )
    # The slow step is still running when its tool card shows up: the card came over the live socket.
    slow = operator_page.locator(".item-tool", has_text="slow_step")
    expect(slow).to_be_visible(timeout=RUN_TIMEOUT_MS)
    expect(operator_page.locator("#execution-status")).to_have_text("running")
    expect(operator_page.locator(".lane-head .lane-status")).to_have_text("running")
    expect(operator_page.locator("#connection")).to_have_attribute("data-state", "live")
    expect(operator_page.locator("form.cancel")).to_be_visible()
    screenshot(operator_page, "live-run.png")

    wait_for_status(operator_page, "completed")
    operator_page.locator(".item-finished").wait_for(timeout=RUN_TIMEOUT_MS)
    stored = wait_until_everything_is_drawn(operator_page, execution)
    assert dom_positions(operator_page) == stored == list(range(1, len(stored) + 1))
    expect(operator_page.locator(".lane-head .lane-status")).to_have_text("completed")
    expect(operator_page.locator("form.cancel")).to_be_hidden()
    # The researcher child ran inline: its lane is nested in the delegation tool's card.
    nested = operator_page.locator(".item-tool", has_text="delegate_to_researcher").locator(".item-subagent")
    expect(nested).to_have_count(1)
    expect(nested).to_contain_text("Research summary")
    # Nothing was received twice.
    assert operator_page.evaluate("() => window.harnessTimeline.received") == len(stored)


def test_reloading_mid_run_shows_the_same_timeline_without_gaps_or_doubles(operator_page, live_stack, demo_thread):
    execution = start_from_the_thread_page(
        operator_page, live_stack.base_url, demo_thread, "Look up the records, then a slow step of 4 seconds"
    )
    operator_page.locator(".item-tool", has_text="slow_step").wait_for(timeout=RUN_TIMEOUT_MS)
    before = dom_positions(operator_page)
    operator_page.reload()
    # The replay has drawn at least what the page showed before the reload.
    operator_page.wait_for_function(
        "(last) => Number(document.querySelector('#timeline').dataset.rendered) >= last", arg=before[-1]
    )
    after_reload = dom_positions(operator_page)
    assert after_reload[: len(before)] == before
    wait_for_status(operator_page, "completed")
    operator_page.locator(".item-finished").wait_for(timeout=RUN_TIMEOUT_MS)
    stored = wait_until_everything_is_drawn(operator_page, execution)
    assert dom_positions(operator_page) == stored == list(range(1, len(stored) + 1))
    assert operator_page.evaluate("() => window.harnessTimeline.received") == len(stored)


def test_the_page_resumes_from_its_cursor_after_daphne_restarts(operator_page, live_stack, demo_thread):
    execution = start_from_the_thread_page(
        operator_page, live_stack.base_url, demo_thread, "Run a slow step of 6 seconds, then look up the records"
    )
    operator_page.locator(".item-tool", has_text="slow_step").wait_for(timeout=RUN_TIMEOUT_MS)
    live_stack.restart_daphne()
    wait_for_status(operator_page, "completed")
    operator_page.locator(".item-finished").wait_for(timeout=RUN_TIMEOUT_MS)
    stored = wait_until_everything_is_drawn(operator_page, execution)
    assert dom_positions(operator_page) == stored == list(range(1, len(stored) + 1))
    subscriptions = operator_page.evaluate("() => window.harnessTimeline.subscriptions")
    # First from nothing, then (after the restart) from the cursor it had, never from nothing again.
    assert subscriptions[0] is None
    assert len(subscriptions) >= 2
    assert all(isinstance(after, int) and after > 0 for after in subscriptions[1:])
    assert operator_page.evaluate("() => window.harnessTimeline.received") == len(stored)
    expect(operator_page.locator("#connection")).to_have_attribute("data-state", "live")


def test_the_threads_list_updates_statuses_without_a_reload(operator_page, live_stack, demo_thread):
    operator_page.goto(f"{live_stack.base_url}/")
    badge = operator_page.locator(f'[data-thread-status="{demo_thread.pk}"]')
    expect(badge).to_have_text("idle")
    operator_page.wait_for_function("() => document.body.dataset.liveStatus === 'live'")
    operator_page.evaluate("() => { window.__sameDocument = true; }")
    thread_page = operator_page.context.new_page()
    thread_page.goto(f"{live_stack.base_url}/threads/{demo_thread.pk}/")
    thread_page.wait_for_function("() => document.body.dataset.liveStatus === 'live'")
    expect(thread_page.locator("#new-activity")).to_be_hidden()

    executions.start_execution(demo_thread, "Look up the records, then a slow step of 2 seconds")
    expect(badge).to_have_class(re.compile(r"\bstatus-running\b"), timeout=RUN_TIMEOUT_MS)
    expect(badge).to_have_class(re.compile(r"\bstatus-completed\b"), timeout=RUN_TIMEOUT_MS)
    assert operator_page.evaluate("() => window.__sameDocument") is True
    # The thread page updates its own badge and says a new execution is there to be seen.
    expect(thread_page.locator(f'[data-thread-status="{demo_thread.pk}"]')).to_have_class(
        re.compile(r"\bstatus-completed\b")
    )
    expect(thread_page.locator("#new-activity")).to_be_visible()


def sweep_in_a_process_of_its_own(stack) -> None:
    """What the sweeper process of `bin/run` does once (this process runs Playwright's event loop)."""
    subprocess.run([sys.executable, "manage.py", "harness_recover"], cwd=ROOT, env=stack.env, check=True)


def test_a_crashed_worker_leaves_a_recovery_run_in_a_second_lane(operator_page, live_stack, demo_thread):
    current = executions.current_policy_version()
    policy.publish_policy_version(current.policy, created_by=None, comment="fast leases", lease_seconds=3)
    execution = start_from_the_thread_page(
        operator_page, live_stack.base_url, demo_thread, "Run a slow step of 20 seconds, then look up the records"
    )
    operator_page.locator(".item-tool", has_text="slow_step").wait_for(timeout=RUN_TIMEOUT_MS)
    live_stack.worker.kill()
    live_stack.restart_worker()
    deadline = time.monotonic() + RUN_TIMEOUT_MS / 1000
    while Execution.objects.get(pk=execution.pk).status != "completed":
        assert time.monotonic() < deadline, live_stack.worker.log()[-3000:]
        sweep_in_a_process_of_its_own(live_stack)
    wait_for_status(operator_page, "completed")
    heads = operator_page.locator(".lane-head")
    expect(heads).to_have_count(2)
    expect(heads.nth(0).locator(".lane-status")).to_have_text("abandoned")
    expect(heads.nth(1).locator(".lane-reason")).to_have_text(re.compile("recovery", re.IGNORECASE))
    expect(heads.nth(1).locator(".lane-status.status-completed")).to_be_visible()
    operator_page.locator(".item-finished").wait_for(timeout=RUN_TIMEOUT_MS)
    stored = wait_until_everything_is_drawn(operator_page, execution)
    assert dom_positions(operator_page) == stored == list(range(1, len(stored) + 1))
    # The recovery run's items are in the second column, below everything of the first run.
    first_run_last = TimelineEvent.objects.filter(execution=execution, run__number=1).order_by("-position").first()
    second_run_first = TimelineEvent.objects.filter(execution=execution, run__number=2).order_by("position").first()
    first_box = operator_page.locator(f'[data-positions~="{first_run_last.position}"]').bounding_box()
    second_box = operator_page.locator(f'[data-positions~="{second_run_first.position}"]').bounding_box()
    assert second_box["x"] >= first_box["x"] + first_box["width"]
    assert second_box["y"] > first_box["y"]
    screenshot(operator_page, "recovery-lanes-live.png")
