"""Every page works under the strict Content-Security-Policy: Chromium reports no violation anywhere."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.support import factories

RECORD_VIOLATIONS = """
window.cspViolations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.cspViolations.push(`${e.violatedDirective} ${e.blockedURI} ${e.sourceFile}:${e.lineNumber}`);
});
"""


def test_no_page_violates_the_content_security_policy(operator_page, live_stack, django_user_model):
    execution = factories.make_execution(status="completed")
    run = factories.make_run(execution, status="completed")
    factories.append_events(run, factories.text_run_events(run, ["hello ", "world"]))
    django_user_model.objects.filter(username="op").update(is_staff=True, is_superuser=True)
    page = operator_page
    page.add_init_script(RECORD_VIOLATIONS)
    base = live_stack.base_url
    pages = {
        "/": "h1",
        f"/threads/{execution.thread_id}/": "h1",
        f"/executions/{execution.pk}/": "#timeline .item-message",
        # The counts per status, fetched by the list's script.
        "/executions/": "[data-status-count=any]",
        f"/runs/{run.pk}/": "h1",
        f"/executions/{execution.pk}/events/1/": "h1",
        "/approvals/": "h1",
        "/approvals/audit/": "h1",
        "/admin/": "#content",
        "/admin/runs/agentprofile/add/": "#content",
        "/admin/runs/hostpolicy/add/": "#content",
        f"/admin/runs/hostpolicy/{execution.policy_version.policy_id}/change/": "#approval_rules-rows",
    }
    for path, ready in pages.items():
        response = page.goto(base + path)
        assert "script-src 'self'" in response.headers["content-security-policy"], path
        expect(page.locator(ready).first).to_be_visible()
        assert page.evaluate("window.cspViolations") == [], path
