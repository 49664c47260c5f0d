"""Benchmark 5: opening a 20,000-event execution page in Chromium (Playwright, /usr/bin/chromium).

Per repetition a fresh browser context opens `/executions/<pk>/` (logged in by session cookie) on the real
daphne. An init script notes, on the page's own clock (`performance.now()`, from navigation start), when the
timeline first shows rendered events (`#timeline[data-rendered]` > 0: the first lane is drawn), when the socket
reached `ready` (`#connection[data-state=live]`) and when every event is drawn; the JS heap in use is read
over CDP (`Runtime.getHeapUsage`) after a forced garbage collection, once everything is drawn.
"""

from __future__ import annotations

from tests.support.services import CHROMIUM, CHROMIUM_ARGS

from .context import BenchContext
from .measure import Comparison, Report, Stats, Target
from .sockets import daphne, operator_cookie, seed_timeline, timeline_events
from .synthetic import SIZES, SyntheticRun, synthetic_run

__all__ = ("run",)

EVENTS = 20_000
MARKS = """
window.__bench = {};
new MutationObserver(() => {
  const now = performance.now();
  const timeline = document.getElementById("timeline");
  const connection = document.getElementById("connection");
  const rendered = Number(timeline?.dataset.rendered || 0);
  if (rendered > 0 && window.__bench.firstLane === undefined) window.__bench.firstLane = now;
  if (connection?.dataset.state === "live" && window.__bench.ready === undefined) window.__bench.ready = now;
  window.__bench.rendered = rendered;
  window.__bench.renderedAt = now;
}).observe(document, {subtree: true, attributes: true, attributeFilter: ["data-rendered", "data-state"]});
"""


def _source(context: BenchContext) -> tuple[SyntheticRun, int]:
    """The run whose timeline prefix is the page's execution: 20,000 events (fewer in quick mode)."""
    if context.quick:
        synthetic = synthetic_run(SIZES["1k"])
        return synthetic, len(timeline_events(synthetic))
    synthetic = synthetic_run(SIZES[context.largest])
    return synthetic, min(EVENTS, len(timeline_events(synthetic)))


def run(context: BenchContext) -> Report:
    from playwright.sync_api import sync_playwright

    from runs.models import TimelineEvent

    from .host import discard, leased_run

    report = Report("browser", context.database, context.quick, context.repeats)
    synthetic, count = _source(context)
    discard(synthetic.thread_id)
    run_row, _ = leased_run(synthetic.thread_id, synthetic.run_id)
    seed_timeline(run_row, synthetic)
    TimelineEvent.objects.filter(execution_id=run_row.execution_id, position__gt=count).delete()
    server = daphne()
    cookie_name, cookie_value = operator_cookie().split("=", 1)
    url = f"{server.base_url}/executions/{run_row.execution_id}/"
    first_lane, ready, all_drawn, heap = [], [], [], []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            for repetition in range(context.repeats + 1):
                page_context = browser.new_context(viewport={"width": 1400, "height": 900}, bypass_csp=True)
                page_context.add_cookies([{"name": cookie_name, "value": cookie_value, "url": server.base_url}])
                page = page_context.new_page()
                page.add_init_script(MARKS)
                page.goto(url)
                page.wait_for_function(f"window.__bench && window.__bench.rendered >= {count}", timeout=120_000)
                page.wait_for_function("window.__bench.ready !== undefined", timeout=120_000)
                marks = page.evaluate("window.__bench")
                cdp = page_context.new_cdp_session(page)
                cdp.send("HeapProfiler.collectGarbage")
                used = cdp.send("Runtime.getHeapUsage")["usedSize"]
                page_context.close()
                if repetition == 0:
                    continue  # warm-up: daphne, the static files and the browser's caches
                first_lane.append(marks["firstLane"] / 1000)
                ready.append(marks["ready"] / 1000)
                all_drawn.append(marks["renderedAt"] / 1000)
                heap.append(used / 1024 / 1024)
        finally:
            browser.close()
    discard(synthetic.thread_id)

    size = "20k" if count == EVENTS else str(count)
    for name, values, unit, target in (
        ("time to first rendered lane", first_lane, "s", Target("median", "<", 2.0, "first lane under 2 s")),
        ("time to ready", ready, "s", Target("median", "<", 2.0, "`ready` under 2 s")),
        ("time to all events drawn", all_drawn, "s", None),
        ("JS heap used", heap, "MB", Target("median", "<", 200.0, "JS heap under 200 MB")),
    ):
        report.add(
            Comparison(
                name=name,
                size=size,
                items=count if unit == "s" else 0,
                subject=Stats.of(values),
                baseline=None,
                baseline_name="",
                target=target,
                unit=unit,
            )
        )
    report.notes.append(
        f"Chromium {CHROMIUM} via Playwright, one fresh context per repetition (after one warm-up); times from "
        "navigation start on the page's clock; heap = CDP Runtime.getHeapUsage usedSize after a forced GC, "
        f"once all {count} events were drawn."
    )
    return report
