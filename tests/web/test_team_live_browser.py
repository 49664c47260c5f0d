"""Teams, live: work of team A appears on the pages of team A's members as it happens, and never on those of a
viewer of team B, neither on the threads page nor in the approvals badge.

Every assertion waits with Playwright's `expect`. What must not appear is asserted after a barrier: a change of
team B's own thread, published after team A's and delivered on the same socket, has reached the viewer's page.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from runs.models import AgentProfile, ExecutionStatus, Team, TeamRole
from runs.services.lifecycle import executions
from tests.support import factories
from tests.support.approval_pages import TOOLS, suspend_on_records, wait_for_status
from tests.support.browser import log_in

LIVE_MS = 60_000


@pytest.fixture
def team_b_viewer_page(browser, live_stack, django_user_model):
    """A second browser session: a viewer of team B only, on the threads page, which lists team B's thread."""
    team_b = Team.objects.create(name="team-b")
    profile_b = AgentProfile.objects.create(name="b-demo", model="demo", team=team_b)
    thread_b = executions.create_thread(profile_b, title="team B at work")
    factories.member(django_user_model, "viewer-b", team_b, TeamRole.VIEWER, password="pw-viewer-b-1")
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    opened = context.new_page()
    opened.set_default_timeout(15_000)
    log_in(opened, live_stack.base_url, "viewer-b", "pw-viewer-b-1")
    opened.thread_b = thread_b
    yield opened
    context.close()


def test_a_viewer_of_team_b_never_sees_team_a_s_execution_or_approval_appear(
    operator_page, team_b_viewer_page, live_stack
):
    viewer = team_b_viewer_page
    # Team A's list is not empty either, so its page has the table new threads are added to.
    factories.thread(model="demo")
    for page in (operator_page, viewer):
        page.goto(f"{live_stack.base_url}/")
        expect(page.locator("body")).to_have_attribute("data-live-status", "live", timeout=LIVE_MS)
    expect(viewer.locator("tr[data-thread]")).to_have_count(1)

    # Team A's new thread, started after both pages were open: it runs and waits on two approvals.
    thread_a = factories.thread(model="demo", tools=TOOLS)
    suspend_on_records(thread_a)

    # Team A's member (an approver) sees both appear: the thread as a new row of the list, and the badge.
    expect(operator_page.locator(f'tr[data-thread="{thread_a.pk}"]')).to_be_visible(timeout=LIVE_MS)
    expect(operator_page.locator("[data-approvals-count]")).to_have_text("2", timeout=LIVE_MS)

    # The barrier: team B's thread runs now, and the viewer sees its status change live.
    execution_b = executions.start_execution(viewer.thread_b, "hello")
    wait_for_status(execution_b, ExecutionStatus.COMPLETED)
    expect(viewer.locator(f'[data-thread-status="{viewer.thread_b.pk}"]')).to_have_text("completed", timeout=LIVE_MS)

    expect(viewer.locator("#new-activity")).to_be_hidden()
    expect(viewer.locator("[data-approvals-count]")).to_be_hidden()
    expect(viewer.locator("tr[data-thread]")).to_have_count(1)
    # Reloaded, the page still lists only team B's thread, and the badge counts nothing.
    viewer.reload()
    expect(viewer.locator("tr[data-thread]")).to_have_count(1)
    expect(viewer.locator("[data-approvals-count]")).to_be_hidden()
