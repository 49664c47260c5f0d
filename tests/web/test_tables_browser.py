"""Tables hold their shape (#36): a fixed layout where a long value is cut with its whole text on hover, no
`overflow-wrap: anywhere` in a cell, key columns on one line (the audit's, the diff's key column), even beside a
very long edited argument."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect
from pydantic_ai import ToolCallPart

from runs.services.lifecycle import Answer, submit_decisions
from tests.support import factories
from tests.support.browser import log_in
from tests.support.factories import suspended_execution

LONG_NOTE = "a very long note about this payment " * 80

# How many lines an element's text takes: its boxes' tops, those within a few pixels (inline code, a link) as one.
LINES = """(element) => {
  const range = document.createRange();
  range.selectNodeContents(element);
  const tops = Array.from(range.getClientRects(), (rect) => rect.top).sort((a, b) => a - b);
  return tops.filter((top, index) => index === 0 || top - tops[index - 1] > 6).length;
}"""


@pytest.fixture(autouse=True)
def test_tools(scenario_tools):
    """The payment tool of the approval scenarios."""


def test_a_long_edited_argument_squeezes_no_column(live_stack, django_user_model, page):
    approver = factories.create_decider(django_user_model, "operator-on-call", "pw-operator-1")
    call = ToolCallPart("send_payment", {"amount": 5000, "to": "acme"}, tool_call_id="call-pay")
    waiting = suspended_execution(approvals=(call,), title="A payment with a long note attached")
    submit_decisions(
        waiting.execution,
        checkpoint_id=waiting.checkpoint_id,
        key="tables-1",
        answers=[Answer("call-pay", "approved", override_args={"amount": 50, "to": LONG_NOTE})],
        user=approver,
    )
    page.set_viewport_size({"width": 1440, "height": 900})
    log_in(page, live_stack.base_url, "operator-on-call", "pw-operator-1")
    page.goto(f"{live_stack.base_url}/approvals/audit/")
    table = page.locator("table.audit-decisions")
    expect(table).to_have_css("table-layout", "fixed")
    for cell in table.locator("tbody td").all():
        assert cell.evaluate("(td) => getComputedStyle(td).overflowWrap") != "anywhere"
    for cell in table.locator("tbody td.cut").all():
        assert cell.evaluate(LINES) <= 2 if cell.get_attribute("data-label") == "Tool" else cell.evaluate(LINES) == 1
    who = table.locator('tbody td[data-label="Who"]')
    expect(who).to_have_text("operator-on-call")
    thread = table.locator('tbody td[data-label="Thread"]')
    thread.hover()
    expect(thread).to_have_attribute("title", "A payment with a long note attached")

    page.goto(f"{live_stack.base_url}/executions/{waiting.execution.pk}/")
    keys = page.locator(".arg-diff th")
    expect(keys).to_have_text(["amount", "to"])
    for key in keys.all():
        assert key.evaluate(LINES) == 1
    assert page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")
