"""A what-if fork in real Chromium: an operator changes one tool result of a demo execution from its page, the live
stack's worker runs the fork, and the comparison with the original marks the first divergence."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

from django.db import connection
from playwright.sync_api import expect
from pydantic_ai import ModelRequest, ToolReturnPart

from runs.demo_profile import ensure_demo_profile
from runs.models import Checkpoint, Execution, ExecutionStatus
from runs.services.lifecycle import executions
from runs.services.store import checkpoints
from tests.support.services import wait_until
from tests.support.timeline_page import wait_until_drawn


def recorded_lookup() -> tuple[Execution, int, str]:
    """A demo lookup the live worker ran; the checkpoint after its tool results and the lookup call's id."""
    try:
        original = executions.start_execution(
            executions.create_thread(ensure_demo_profile(), title="what-if original"), "look up REC-7"
        )
        wait_until(
            lambda: Execution.objects.get(pk=original.pk).status == ExecutionStatus.COMPLETED,
            timeout=60,
            what="the original's end on the live worker",
        )
        for checkpoint in Checkpoint.objects.filter(run__execution=original).order_by("pk"):
            last = checkpoints.load(checkpoint).message_history[-1]
            calls = [part for part in last.parts if isinstance(part, ToolReturnPart)]
            if isinstance(last, ModelRequest) and calls:
                lookup = next(part for part in calls if part.tool_name == "lookup_record")
                return original, checkpoint.pk, lookup.tool_call_id
        raise AssertionError("no checkpoint after the lookup's results")
    finally:
        connection.close()


def test_an_operator_forks_a_changed_tool_result_and_compares_it_with_the_original(operator_page, live_stack):
    # In a thread of its own: Django refuses database calls in a thread that runs an event loop (Playwright's).
    with ThreadPoolExecutor(1) as pool:
        original, checkpoint_pk, call_id = pool.submit(recorded_lookup).result()
    page = operator_page
    page.goto(f"{live_stack.base_url}/executions/{original.pk}/")
    wait_until_drawn(page, original)

    page.locator("#what-if summary").click()
    form = page.locator("form.what-if-form")
    form.locator("select[name=checkpoint]").select_option(str(checkpoint_pk))
    form.locator("select[name=kind]").select_option("tool_result")
    form.locator("input[name=tool_call_id]").fill(call_id)
    form.locator("textarea[name=value]").fill(json.dumps("REC-7: status=retired, owner=nobody"))
    form.get_by_role("button", name="Fork with this change").click()

    expect(page.locator("#what-if-of")).to_contain_text(f"#{original.pk}: result of call {call_id} changed")
    expect(page.locator("#what-if-of")).to_contain_text("wait here for an operator's approval")
    # The live stack's worker runs the fork like any execution.
    expect(page.locator("#execution-status")).to_have_text("completed", timeout=60_000)

    page.locator("#compare-original").click()

    expect(page.locator("#compare-verdict")).to_contain_text("The runs diverge at step")
    marked = page.locator("#compare-steps tr.first-divergence")
    expect(marked).to_have_count(1)
    expect(marked.locator(".divergence-badge")).to_have_text("first divergence")
    expect(marked.locator(".compare-right")).to_contain_text("status=retired")
    expect(page.locator("#compare-summary .output-difference")).to_have_text("differs")
    expect(page.locator("#compare-summary .output-b")).to_contain_text("status=retired")
