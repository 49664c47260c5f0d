"""The admin in real Chromium against the live stack: rules and patterns edited as rows, a re-mask run by the RQ
worker with its progress reaching done on the page, and the copy button of a token's secret."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone
from playwright.sync_api import expect

from runs.models import Remask
from runs.services.lifecycle import executions
from tests.support import factories

SECRET = "sk-live-0042"


def log_in_to_admin(page, base_url: str) -> None:
    page.goto(f"{base_url}/admin/login/")
    page.fill("input[name=username]", "boss")
    page.fill("input[name=password]", "boss-password-1")
    page.click("input[type=submit]")
    expect(page.locator("#site-name .brand")).to_have_text("Harness Host")


def test_rules_and_patterns_as_rows_then_a_remask_whose_progress_reaches_done(live_stack, django_user_model, page):
    django_user_model.objects.create_superuser("boss", password="boss-password-1")
    policy = executions.current_policy_version().policy
    stored = []
    for _ in range(3):
        execution = factories.make_execution(status="completed", input=f"use api_key={SECRET}")
        run = factories.make_run(execution, status="completed")
        factories.append_events(run, factories.text_run_events(run, [f"api_key: {SECRET} ok"]))
        stored.append(execution)
    assert {execution.policy_version.policy_id for execution in stored} == {policy.pk}
    log_in_to_admin(page, live_stack.base_url)
    page.goto(f"{live_stack.base_url}/admin/runs/hostpolicy/{policy.pk}/change/")

    # A rule in the blank row, a second one added, mistyped: the error shows beside that row, nothing is saved.
    page.fill("input[name=approval_rules-0-tool]", "lookup_record")
    page.fill("input[name=approval_rules-0-reason]", "Records are private.")
    page.get_by_role("button", name="Add a rule").click()
    page.fill("input[name=approval_rules-1-tool]", "lookup_recrod")
    page.fill("input[name=redact_patterns-0-pattern]", "api_key")
    page.click("input[name=_continue]")
    expect(page.locator('#approval_rules-rows tr[data-row="1"] .row-errors')).to_contain_text(
        "did you mean lookup_record?"
    )
    policy.refresh_from_db()
    assert policy.current_version.approval_rules == []

    page.fill("input[name=approval_rules-1-tool]", "search_records")
    page.select_option("select[name=approval_rules-1-op]", "contains")
    page.fill("input[name=approval_rules-1-arg]", "query")
    page.fill("input[name=approval_rules-1-value]", "REC-7")
    page.click("input[name=_continue]")
    expect(page.locator(".messagelist .success").first).to_be_visible()
    policy.refresh_from_db()
    assert policy.current_version.approval_rules == [
        {"tool": "lookup_record", "reason": "Records are private."},
        {"tool": "search_records", "when": {"arg": "query", "op": "contains", "value": "REC-7"}},
    ]
    assert policy.current_version.redact_patterns == ["api_key"]

    page.click("#start-remask")
    status = page.locator("#remask-status")
    expect(status.locator("[data-remask-total]")).to_have_text("3")
    expect(status.locator("[data-remask-done]")).to_have_text("3", timeout=60_000)
    expect(status.locator("[data-remask-state]")).to_have_text("Done: 3 timeline events changed.")
    assert Remask.objects.get().started_by.username == "boss"
    for execution in stored:
        events = " ".join(str(event) for event in execution.timeline.values_list("event", flat=True))
        assert SECRET not in events and "[redacted]" in events


def test_the_copy_button_puts_the_token_secret_on_the_clipboard(live_stack, django_user_model, browser):
    boss = django_user_model.objects.create_superuser("boss", password="boss-password-1")
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_stack.base_url)
    page = context.new_page()
    page.set_default_timeout(15_000)
    try:
        log_in_to_admin(page, live_stack.base_url)
        page.goto(f"{live_stack.base_url}/admin/agui_api/apitoken/add/")
        expires = timezone.localtime() + timedelta(days=30)
        page.select_option("select[name=user]", str(boss.pk))
        page.fill("input[name=name]", "CopilotKit app")
        page.fill("input[name=expires_at_0]", f"{expires:%Y-%m-%d}")
        page.fill("input[name=expires_at_1]", f"{expires:%H:%M:%S}")
        page.click("input[name=_save]")
        secret = page.locator("#api-token-secret").inner_text()
        assert secret.startswith("hh_")

        page.get_by_role("button", name="Copy").click()

        expect(page.locator(".copy-state")).to_have_text("Copied.")
        assert page.evaluate("navigator.clipboard.readText()") == secret
    finally:
        context.close()
