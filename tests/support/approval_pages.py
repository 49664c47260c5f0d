"""What the approval browser tests share: the demo tools they offer, an execution suspended on two gated record
tools, waiting for an execution's status, and a request's row on the page."""

from __future__ import annotations

from playwright.sync_api import Locator, Page

from runs.models import Execution, ExecutionStatus, Thread
from runs.services.lifecycle import executions
from tests.support import factories
from tests.support.services import wait_until

TOOLS = ["lookup_record", "search_records", "deploy_release", "ask_operator"]


def wait_for_status(execution: Execution, *statuses: str, timeout: float = 60) -> None:
    def reached() -> bool:
        execution.refresh_from_db()
        return execution.status in statuses

    wait_until(reached, timeout=timeout, what=f"execution {execution.pk} to become {' or '.join(statuses)}")


def suspend_on_records(thread: Thread) -> Execution:
    factories.configure_policy(
        approval_rules=[
            {"tool": "lookup_record", "reason": "Records are private."},
            {"tool": "search_records", "reason": "Searches leave traces."},
        ]
    )
    execution = executions.start_execution(thread, "look up REC-42")
    wait_for_status(execution, ExecutionStatus.WAITING)
    return execution


def row(page: Page, tool_name: str) -> Locator:
    return page.locator(".deferred-request", has=page.locator(f"code.tool-name:text-is('{tool_name}')"))
