"""One duration model on every surface (#36): on the demo's executions (a recovery, an approval, a wait cancelled,
a Host-managed child and its parent) the page header, the lane heads, the time axis and the gaps between lanes
say the same times as runs.services.reports.durations, within the rounding of their one-decimal format."""

from __future__ import annotations

import re

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from runs.services.reports import durations
from tests.support import factories
from tests.support.demo_scenes import CANCEL_AFTER_SECONDS, CHILD_TITLE, demo_scene
from tests.support.timeline_page import wait_until_drawn

DURATION = re.compile(r"(?:(\d+) h )?(?:(\d+) min )?(\d+(?:\.\d)?) (s|min)")


def seconds(text: str) -> float:
    """ "3.2 s", "2 min 05 s", "1 h 05 min" as seconds."""
    match = DURATION.search(text)
    assert match, f"no duration in {text!r}"
    hours, minutes, last, unit = match.groups()
    if unit == "min":
        return int(hours or 0) * 3600 + float(last) * 60
    return int(hours or 0) * 3600 + int(minutes or 0) * 60 + float(last)


def close(a: float, b: float, *, parts: int = 1) -> bool:
    """Equal within the rounding of `parts` one-decimal numbers (each off by at most 0.05 s)."""
    return abs(a - b) <= 0.05 * parts + 0.051


@pytest.fixture
def fast_recovery(settings):
    settings.HARNESS_RECOVERY_BACKOFF_SECONDS = 0.2
    factories.configure_policy(lease_seconds=3, max_attempts=10)


def header_times(page) -> dict[str, float]:
    text = page.locator("#execution-totals").inner_text()
    match = re.search(r"active (.+?) · wall (.+?)(?: \(waited (.+?)\))?(?: · |$)", text)
    assert match, text
    active, wall, waited = match.groups()
    return {"active": seconds(active), "wall": seconds(wall), "waited": seconds(waited) if waited else 0.0}


def check_agreement(page, execution) -> None:
    times = durations.execution_times(execution)
    now = timezone.now()
    header = header_times(page)
    runs = {span.run.pk: span.active(now).total_seconds() for span in times.spans}
    heads = {pk: seconds(page.locator(f'.lane-head[data-run="{pk}"] .lane-duration').inner_text()) for pk in runs}
    axis_runs = {
        pk: seconds(page.locator(f'#time-axis .axis-run[data-run="{pk}"] .axis-length').inner_text()) for pk in runs
    }
    axis_waits = [seconds(text) for text in page.locator("#time-axis .axis-wait .axis-length").all_inner_texts()]
    what = f"{execution.thread.title}: header {header}, heads {heads}, axis {axis_runs} + {axis_waits}"
    for pk, active in runs.items():
        assert close(heads[pk], active) and close(axis_runs[pk], active), what
    assert close(header["active"], times.active(now).total_seconds()), what
    assert close(header["wall"], times.wall(now).total_seconds()), what
    assert close(header["active"], sum(heads.values()), parts=len(heads) + 1), what
    assert close(header["wall"], sum(axis_runs.values()) + sum(axis_waits), parts=len(runs) + len(axis_waits) + 1), what
    assert close(header["waited"], sum(axis_waits), parts=len(axis_waits) + 1), what
    assert len(axis_waits) == len(times.waits), what


def test_header_lane_heads_axis_and_gaps_agree_on_the_demo_executions(
    live_stack, operator_user, fast_recovery, operator_page
):
    scene = demo_scene(operator_user)
    page = operator_page
    for title in (
        "Recovered after a crash",
        "Deployment (needs approval)",
        "Question for the operator",
        CHILD_TITLE,
        "child",
    ):
        execution = scene[title]
        page.goto(f"{live_stack.base_url}/executions/{execution.pk}/")
        wait_until_drawn(page, execution)
        expect(page.locator("#time-axis")).to_be_visible()
        check_agreement(page, execution)

    # The dead run worked until its last sign of life; the time until its lease expired is a wait.
    crashed = scene["Recovered after a crash"]
    page.goto(f"{live_stack.base_url}/executions/{crashed.pk}/")
    wait_until_drawn(page, crashed)
    causes = page.locator("#time-axis .axis-wait .axis-cause")
    expect(causes).to_have_text(["lease expired", "recovery"])
    dead = crashed.runs.get(number=1)
    assert seconds(page.locator(f'.lane-head[data-run="{dead.pk}"] .lane-duration').inner_text()) < 2.5

    # A wait cancelled is drawn: on the axis and between the lane's items, with how it ended.
    cancelled = scene["Question for the operator"]
    page.goto(f"{live_stack.base_url}/executions/{cancelled.pk}/")
    wait_until_drawn(page, cancelled)
    wait = page.locator("#time-axis .axis-wait")
    expect(wait.locator(".axis-cause")).to_have_text("waiting for an answer, then cancelled")
    assert seconds(wait.locator(".axis-length").inner_text()) >= CANCEL_AFTER_SECONDS
    expect(page.locator(".time-gap .gap-label")).to_have_text(re.compile(r"· waiting for an answer, then cancelled$"))
    # A question's card says it waits for an answer, not for "an external result".
    expect(page.locator(".item-interrupt .item-label")).to_have_text("waiting for an answer")

    # The parent of a child waits for it, and says so.
    parent = scene[CHILD_TITLE]
    page.goto(f"{live_stack.base_url}/executions/{parent.pk}/")
    wait_until_drawn(page, parent)
    expect(page.locator("#time-axis .axis-wait .axis-cause").first).to_have_text("waiting for a child execution")
