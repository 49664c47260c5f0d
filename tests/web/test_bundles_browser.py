"""An imported copy in real Chromium: its timeline, lanes, time axis, compare and raw events work as the
original's did, and the page says where it came from."""

from __future__ import annotations

import io

from django.conf import settings
from playwright.sync_api import expect

from runs.models import DEFAULT_TEAM, BundleMode, Execution, Team, Thread
from runs.services.lifecycle import bundle_import
from tests.support.bundles import exported, two_lanes
from tests.support.timeline_page import wait_until_drawn


def test_an_imported_execution_draws_its_lanes_axis_comparison_and_raw_events(operator_page, live_stack):
    original = two_lanes()
    bundle = exported(original, BundleMode.REDACTED)
    Thread.objects.filter(pk=original.thread_id).delete()
    transfer = bundle_import.import_bundle(io.BytesIO(bundle), team=Team.objects.get_or_create(name=DEFAULT_TEAM)[0])
    copy = Execution.objects.get(pk=transfer.execution_id)
    first, second = copy.runs.order_by("number")
    page = operator_page

    page.goto(f"{live_stack.base_url}/executions/{copy.pk}/")
    wait_until_drawn(page, copy)

    expect(page.locator("#imported")).to_contain_text(f"imported from {settings.HARNESS_HOST_NAME}")
    expect(page.locator(f'.lane-head[data-run="{first.pk}"]')).to_be_visible()
    expect(page.locator(f'.lane-head[data-run="{second.pk}"]')).to_be_visible()
    expect(page.locator(f'#time-axis .axis-run[data-run="{second.pk}"] .axis-label')).to_contain_text("run 2")
    page.locator("#compare-toggle").click()
    divergence = page.locator("#compare tr.first-divergence")
    expect(divergence.locator(".compare-note")).to_have_text("first divergence the arguments differ")
    page.goto(f"{live_stack.base_url}/executions/{copy.pk}/events/2/")
    expect(page.locator("body")).to_contain_text("lookup_record")
