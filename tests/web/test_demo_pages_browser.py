"""The demo's pages as an operator meets them (#36), each test on the demo settled (a recovery, an approval, a
wait cancelled, a Host-managed child and its parent): one duration model on every surface (header, lane heads,
time axis, gaps agree with runs.services.reports.durations within the rounding of their one-decimal format),
compare lanes aligned after a takeover, and every page usable at 390 px."""

from __future__ import annotations

import re

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from runs.models import Execution, ExecutionStatus
from runs.services.reports import durations
from tests.support import factories
from tests.support.demo_scenes import CANCEL_AFTER_SECONDS, CHILD_TITLE, demo_scene
from tests.support.services import wait_until
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
    """Equal within the rounding of `parts` shown numbers: tenths of a second under a minute, whole seconds
    ("1 min 02 s", cut) from one minute on."""
    whole = 1.0 if max(a, b) >= 60 else 0.05
    return abs(a - b) <= whole + 0.05 * parts + 0.001


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


def test_compare_lanes_line_a_recovery_and_a_resume_up_after_what_they_took_over(
    live_stack, operator_user, fast_recovery, operator_page
):
    scene = demo_scene(operator_user)
    page = operator_page
    for title in ("Recovered after a crash", "Deployment (needs approval)"):
        execution = scene[title]
        page.goto(f"{live_stack.base_url}/executions/{execution.pk}/")
        wait_until_drawn(page, execution)
        page.locator("#compare-toggle").click()
        compare = page.locator("#compare")
        rows = compare.locator(".compare-rows tr")
        taken = compare.locator(".compare-rows tr.taken-over")
        expect(taken.first).to_be_visible()
        count = taken.count()
        # The prefix comes first, the later run's steps only after it; its right cells are empty.
        expect(rows.nth(0)).to_have_class("taken-over")
        expect(taken.locator(".compare-right")).to_have_text(["—"] * count)
        expect(taken.locator(".compare-note")).to_have_text(["taken over by run 2"] * count)
        assert "taken-over" not in (rows.nth(count).get_attribute("class") or "")
        expect(compare.locator(".compare-verdict")).to_contain_text(f"after the {count} step")
        # Texts keep their separators: no "resultHere".
        for cell in compare.locator(".compare-left, .compare-right").all_inner_texts():
            assert not re.search(r"result[A-Z]", cell), cell


# Words (up to 24 characters; a longer token may break) whose letters fall on more than one line; a hyphen is a
# place a line may end, as in "REC-" / "42".
BROKEN_WORDS = """(selector) => {
  const broken = [];
  for (const root of document.querySelectorAll(selector)) {
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const text = node.data;
      for (const match of text.matchAll(/[^\\s-]+/g)) {
        if (match[0].length < 2 || match[0].length > 24) continue;
        const range = document.createRange();
        range.setStart(node, match.index);
        range.setEnd(node, match.index + match[0].length);
        const tops = new Set(Array.from(range.getClientRects(), (rect) => Math.round(rect.top)));
        if (tops.size > 1) broken.push(match[0]);
      }
    }
  }
  return broken;
}"""
NO_SIDEWAYS = "document.documentElement.scrollWidth <= document.documentElement.clientWidth"


def test_at_390_px_the_lists_are_cards_the_decision_comes_first_and_one_lane_shows(
    live_stack, operator_user, fast_recovery, operator_page
):
    scene = demo_scene(operator_user)
    page = operator_page
    page.set_viewport_size({"width": 390, "height": 844})
    base = live_stack.base_url

    for url in ("/", "/approvals/", "/approvals/audit/"):
        page.goto(base + url)
        rows = page.locator("table.cards-narrow tbody tr")
        expect(rows.first).to_be_visible()
        expect(page.locator("table.cards-narrow thead")).to_be_hidden()
        assert rows.first.evaluate("(row) => getComputedStyle(row).display") == "block"
        assert page.evaluate(NO_SIDEWAYS), url
        assert page.evaluate(BROKEN_WORDS, "main") == [], url
    # The inbox's way to decide is on the screen, not beyond a table's own sideways scroll.
    page.goto(base + "/approvals/")
    decide = page.locator('#approvals-inbox tr[data-request] td[data-label="Decide"] :is(a, button)').first
    expect(decide).to_be_in_viewport()
    box = decide.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= 390, box

    # A waiting execution: its decision form first, reachable without scrolling, its submit bar always in view.
    tour = scene["Guided tour"]
    page.goto(f"{base}/executions/{tour.pk}/")
    wait_until_drawn(page, tour)
    form = page.locator("#approval-form")
    expect(form.locator("input[type=radio]").first).to_be_in_viewport()
    submit = form.locator(".submit-decisions")
    expect(submit).to_be_in_viewport()
    assert form.bounding_box()["y"] < page.locator("form.cancel").bounding_box()["y"]
    assert form.bounding_box()["y"] < page.locator(".facts").bounding_box()["y"]
    for target in [submit, *form.locator(".choices label").all(), page.locator("form.cancel button")]:
        assert target.bounding_box()["height"] >= 44, target
    assert page.evaluate(NO_SIDEWAYS)
    assert page.evaluate(BROKEN_WORDS, "main") == []

    # Two lanes: one at a time, chosen with the switcher.
    crashed = scene["Recovered after a crash"]
    wait_until(
        lambda: crashed.runs.count() == 2 and Execution.objects.get(pk=crashed.pk).status == ExecutionStatus.COMPLETED,
        timeout=60,
        what="the crashed demo execution's recovery run to end",
    )
    page.goto(f"{base}/executions/{crashed.pk}/")
    wait_until_drawn(page, crashed)
    first, second = crashed.runs.order_by("number")
    choices = page.locator("#lane-switcher .lane-choice")
    expect(choices).to_have_text(["run 1 · initial", "run 2 · recovery"])
    expect(page.locator(f'.lane-head[data-run="{second.pk}"]')).to_be_visible()
    expect(page.locator(f'.lane-head[data-run="{first.pk}"]')).to_be_hidden()
    choices.nth(0).click()
    expect(page.locator(f'.lane-head[data-run="{first.pk}"]')).to_be_visible()
    expect(page.locator(f'.lane-head[data-run="{second.pk}"]')).to_be_hidden()
    expect(page.locator('#timeline > .item[data-col="1"]').first).to_be_visible()
    expect(page.locator('#timeline > .item[data-col="2"]').first).to_be_hidden()
    assert page.evaluate(NO_SIDEWAYS)
    assert page.evaluate(BROKEN_WORDS, "main") == []
