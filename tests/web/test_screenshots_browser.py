"""The main pages at 1440 and 390 px against stored pictures (#36), so a layout regression fails a test: the
threads list, a thread, a recovered execution's lanes, the approvals inbox, a decision form, the audit and compare.

Each page shows only what `seed` made, at fixed times under a frozen browser clock, in DejaVu fonts and without
animations; tests/support/screenshots.py compares within a tolerance and says where the diff is.
`HARNESS_UPDATE_SCREENSHOTS=1` retakes the references (docs/development.md)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta

import pytest
from ag_ui.core import (
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    ToolCallResultEvent,
)
from django.apps import apps
from django.conf import settings
from django.db.models import DateTimeField
from django.utils.text import slugify
from playwright.sync_api import Page, expect

from runs.models import Decision, Execution, Run, Thread
from runs.services.lifecycle import Answer, submit_decisions
from tests.support import factories, png, screenshots
from tests.support.browser import log_in
from tests.support.timeline_page import text_message_events, tool_call_events, wait_until_drawn

WIDTHS = {"1440": (1440, 900), "390": (390, 844)}
T0 = int(factories.START.timestamp() * 1000)


@dataclass(frozen=True)
class Scene:
    recovered: Execution
    first: Run
    second: Run
    waiting: Execution
    decided_thread: Thread


@pytest.fixture(autouse=True)
def approval_tools(scenario_tools):
    """The payment tools of the approval scenarios."""


def tool(call_id: str, name: str, args: str, result: str, at: int) -> list:
    events = [
        *tool_call_events(call_id, name, args),
        ToolCallResultEvent(message_id=f"{call_id}:result", tool_call_id=call_id, content=result),
    ]
    return [event.model_copy(update={"timestamp": at + 400 * offset}) for offset, event in enumerate(events)]


def recovered_execution() -> tuple[Execution, Run, Run]:
    """A run that looks up a record and dies; the recovery run takes over after its lease expired and finishes."""
    thread = factories.make_thread("Reconcile the March ledger")
    execution = factories.make_execution(thread, status="completed", input="Reconcile the March ledger for ACME")
    thread_id = thread.thread_id
    first = factories.make_run(
        execution,
        run_id="run-ledger-1",
        status="abandoned",
        failure_code="worker_lost",
        finished_at=factories.START + timedelta(seconds=32),
    )
    factories.append_events(
        first,
        [
            RunStartedEvent(thread_id=thread_id, run_id=first.run_id, timestamp=T0),
            *tool("call-1", "lookup_record", '{"record_id": "REC-7"}', '{"id": "REC-7", "owner": "acme"}', T0 + 300),
            RunErrorEvent(code="worker_lost", message="The worker stopped.", timestamp=T0 + 32_500),
        ],
    )
    second = factories.make_run(
        execution,
        run_id="run-ledger-2",
        reason="recovery",
        previous_run=first,
        status="completed",
        started_at=factories.START + timedelta(seconds=34),
        finished_at=factories.START + timedelta(seconds=38),
    )
    at = T0 + 34_000
    factories.append_events(
        second,
        [
            RunStartedEvent(thread_id=thread_id, run_id=second.run_id, timestamp=at),
            *tool("call-1", "lookup_record", '{"record_id": "REC-7"}', '{"id": "REC-7", "owner": "acme"}', at + 200),
            *tool("call-2", "search_records", '{"query": "acme march"}', '["INV-31", "INV-32"]', at + 1_500),
            *[
                event.model_copy(update={"timestamp": at + 3_000})
                for event in text_message_events("t1", "Two invoices match the ledger: INV-31 and INV-32.")
            ],
            RunFinishedEvent(
                thread_id=thread_id, run_id=second.run_id, outcome={"type": "success"}, timestamp=at + 4_000
            ),
        ],
    )
    return execution, first, second


def pin_ids(*made_elsewhere: Thread) -> None:
    """Thread ids, and the run ids of threads other factories made, named after the thread's title rather than a
    counter or a primary key (the seeded runs' events carry the ids they were given); the decisions' digests, keyed
    by each checkout's own secret, one made-up value."""
    Decision.objects.exclude(args_digest="").update(args_digest="5eed" * 16)
    for thread in Thread.objects.all():
        Thread.objects.filter(pk=thread.pk).update(thread_id=f"thread-{slugify(thread.title)}")
    for thread in made_elsewhere:
        for run in Run.objects.filter(execution__thread=thread):
            Run.objects.filter(pk=run.pk).update(run_id=f"run-{slugify(thread.title)}-{run.number}")


def pin_times(since) -> None:
    """Every time the seeding stamped with the clock moves to a fixed one, in the order they were made (the
    factories' own times are already fixed)."""
    base = screenshots.FROZEN_AT - timedelta(hours=2)
    for model in apps.get_app_config("runs").get_models():
        for field in model._meta.concrete_fields:
            if not isinstance(field, DateTimeField):
                continue
            rows = model._default_manager
            stamped = rows.filter(**{f"{field.attname}__gte": since}).order_by(field.attname, "pk")
            for rank, pk in enumerate(stamped.values_list("pk", flat=True)):
                rows.filter(pk=pk).update(**{field.attname: base + timedelta(minutes=5 * rank)})


@pytest.fixture
def scene(live_stack, operator_user, monkeypatch) -> Scene:
    # The resuming run is left queued: the live worker would otherwise run it at its own pace.
    monkeypatch.setattr("runs.services.lifecycle.executions.enqueue_run", lambda run: None)
    since = factories.now() - timedelta(seconds=1)
    quiet = factories.make_execution(factories.make_thread("Summarise the incident notes"), status="completed")
    run = factories.make_run(quiet, run_id="run-notes-1", status="completed")
    factories.append_events(run, factories.text_run_events(run, ["The outage lasted 14 minutes."]))
    recovered, first, second = recovered_execution()
    decided = factories.suspended_execution(title="Refund order 1182")
    submit_decisions(
        decided.execution,
        checkpoint_id=decided.checkpoint_id,
        key="screenshots-1",
        answers=[
            Answer("call-pay", "approved", override_args={"amount": 120, "to": "acme"}),
            Answer("call-del", "denied", message="Keep the data until the audit."),
        ],
        user=operator_user,
    )
    waiting = factories.suspended_execution(title="Pay the March invoices")
    pin_ids(decided.execution.thread, waiting.execution.thread)
    pin_times(since)
    return Scene(recovered, first, second, waiting.execution, decided.execution.thread)


@pytest.fixture(params=WIDTHS)
def width(request) -> str:
    return request.param


@pytest.fixture
def page(browser, live_stack, scene, width) -> Iterator[Page]:
    """Logged in as the operator, at the test's width, with the seeded scene."""
    context = screenshots.open_page(browser, *WIDTHS[width])
    opened = context.new_page()
    log_in(opened, live_stack.base_url, "op", "op-password-1")
    yield opened
    context.close()


def test_threads_list(scene, live_stack, page, width):
    page.goto(live_stack.base_url + "/")
    expect(page.locator("table.threads tbody tr")).to_have_count(4)
    screenshots.check(page, f"threads-{width}")


def test_thread(scene, live_stack, page, width):
    page.goto(live_stack.base_url + f"/threads/{scene.recovered.thread.pk}/")
    expect(page.locator("h1")).to_contain_text("Reconcile the March ledger")
    screenshots.check(page, f"thread-{width}")


def test_recovered_execution(scene, live_stack, page, width):
    page.goto(live_stack.base_url + f"/executions/{scene.recovered.pk}/")
    wait_until_drawn(page, scene.recovered)
    expect(page.locator("#connection")).to_have_attribute("data-state", "live")
    expect(page.locator("#time-axis .axis-wait .axis-cause")).to_have_text(["lease expired", "recovery"])
    screenshots.check(page, f"execution-recovered-{width}")


def test_approvals_inbox(scene, live_stack, page, width):
    page.goto(live_stack.base_url + "/approvals/")
    expect(page.locator("#approvals-inbox tr[data-request]")).to_have_count(2)
    screenshots.check(page, f"inbox-{width}")


def test_decision_form(scene, live_stack, page, width):
    page.goto(live_stack.base_url + f"/executions/{scene.waiting.pk}/")
    expect(page.locator("#approval-form input[type=radio]").first).to_be_visible()
    expect(page.locator("#connection")).to_have_attribute("data-state", "live")
    screenshots.check(page, f"decision-form-{width}")


def test_audit(scene, live_stack, page, width):
    page.goto(live_stack.base_url + "/approvals/audit/")
    expect(page.locator("table.audit-decisions tbody tr")).to_have_count(2)
    screenshots.check(page, f"audit-{width}")


def test_compare(scene, live_stack, page, width):
    page.goto(live_stack.base_url + f"/compare/?a={scene.first.pk}&b={scene.second.pk}")
    expect(page.locator(".compare-verdict")).to_contain_text("The runs diverge at step 3")
    screenshots.check(page, f"compare-{width}")


def test_a_changed_page_fails_with_its_diff(scene, live_stack, page, width, monkeypatch):
    """The check itself: a table moved down fails against the reference and leaves the actual picture and a diff."""
    page.goto(live_stack.base_url + "/")
    expect(page.locator("table.threads tbody tr")).to_have_count(4)
    page.add_style_tag(content="table.threads { margin-top: 40px; }")
    monkeypatch.delenv(screenshots.UPDATE, raising=False)
    with pytest.raises(AssertionError, match=r"pixels changed") as failure:
        screenshots.check(page, f"threads-{width}")
    failed = settings.HARNESS_VAR_DIR / "screenshots" / "failed"
    diff, actual = failed / f"threads-{width}.diff.png", failed / f"threads-{width}.actual.png"
    assert str(diff) in str(failure.value) and str(actual) in str(failure.value)
    assert png.read(actual.read_bytes()).width == WIDTHS[width][0]
    # The diff is the faded reference (every channel at least 192) with the changes in red.
    assert any(b"\xff\x00\x00" in row for row in png.read(diff.read_bytes()).rows)
