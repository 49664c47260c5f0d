"""Budgets in the host policy: the rules, their windows, what they count, and a run stopped and overridden by one
(the real runner in this process, the model of `tests.support.budget_model`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest
from django.urls import reverse
from pydantic_ai.usage import RunUsage

from runs.harness import BUDGET_EXCEEDED, OVER_BUDGET_TOOL
from runs.models import (
    Decision,
    DeferredKind,
    DeferredRequest,
    Execution,
    ExecutionStatus,
    HostPolicyVersion,
    ModelPrice,
    Run,
    RunStatus,
    Verdict,
)
from runs.services.lifecycle import Answer, answerable_requests, executions, submit_decisions
from runs.services.reports import csv_lines
from runs.services.reports.budget_usage import first_spent_budget, rules_of, window_usage
from runs.services.store.budget_rules import parse_budgets, window_bounds
from runs.services.worker import runner
from tests.support import budget_model, factories

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 3, 14, 15, 0, tzinfo=UTC)


def rule(**values: object) -> dict[str, object]:
    return {"scope": "profile", "name": "metered", "window": "day", "unit": "tokens", "limit": 100} | values


@pytest.fixture
def metered(settings):
    settings.HARNESS_DEMO_MODEL = "tests.support.budget_model.model"
    budget_model.CALLS.clear()
    return factories.profile(name="metered", model="demo")


def spent_before(profile, *, tokens: int, user=None, at: datetime | None = None) -> Run:
    """A finished run of `profile` that spent `tokens` (half input, half output), created `at`."""
    execution = executions.start_execution(executions.create_thread(profile), "earlier", user=user)
    run = execution.runs.get()
    usage = {"requests": 1, "input_tokens": tokens // 2, "output_tokens": tokens - tokens // 2}
    Run.objects.filter(pk=run.pk).update(status=RunStatus.COMPLETED, usage=usage, created_at=at or NOW)
    Execution.objects.filter(pk=execution.pk).update(status=ExecutionStatus.COMPLETED)
    run.refresh_from_db()
    return run


# --- rules ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [
        rule(limit=0),
        rule(limit=-5),
        rule(limit=10.5),
        rule(unit="money", limit=10**13),
        rule(unit="money", limit="NaN"),
        rule(scope="team"),
        rule(window="week"),
        rule(name=""),
        rule(name="*"),
        rule(name="a\x00b"),
        rule(extra=1),
        "not a rule",
    ],
)
def test_a_bad_budget_row_is_refused_and_nothing_is_saved(bad):
    factories.configure_policy()
    versions = HostPolicyVersion.objects.count()

    with pytest.raises(ValueError, match="Invalid budgets"):
        factories.configure_policy(budgets=[rule(), bad])

    assert HostPolicyVersion.objects.count() == versions


def test_good_budget_rows_are_saved_as_given():
    rows = [rule(), rule(scope="user", name="*", window="month", unit="money", limit=12.5)]
    factories.configure_policy(budgets=rows)

    assert executions.current_policy_version().budgets == rows
    assert parse_budgets(rows)[1].limit == Decimal("12.5")


def test_windows_are_utc_calendar_days_and_months():
    late = datetime(2026, 12, 31, 23, 59, 59, tzinfo=UTC)
    assert window_bounds("day", late) == (datetime(2026, 12, 31, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC))
    assert window_bounds("month", late) == (datetime(2026, 12, 1, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC))
    # 01:30 on March 1st in UTC+2 is still February 28th in UTC.
    east = datetime(2026, 3, 1, 1, 30, tzinfo=ZoneInfo("Europe/Kyiv"))
    assert window_bounds("day", east)[0] == datetime(2026, 2, 28, tzinfo=UTC)
    assert window_bounds("month", east)[0] == datetime(2026, 2, 1, tzinfo=UTC)
    assert window_bounds("month", datetime(2026, 2, 28, 12, tzinfo=UTC))[1] == datetime(2026, 3, 1, tzinfo=UTC)


# --- counting ------------------------------------------------------------------------------------------------


def test_usage_is_counted_per_profile_and_per_user_within_the_window(metered, django_user_model):
    ann = django_user_model.objects.create_user("ann")
    bob = django_user_model.objects.create_user("bob")
    other = factories.profile(name="other", model="demo")
    spent_before(metered, tokens=40, user=ann)
    spent_before(metered, tokens=30, user=bob)
    spent_before(other, tokens=20, user=ann)
    spent_before(metered, tokens=1000, user=ann, at=NOW - timedelta(days=1))
    asking = executions.start_execution(executions.create_thread(metered), "now", user=ann).runs.get()
    by_profile, each_user = parse_budgets([rule(), rule(scope="user", name="*")])

    assert window_usage(by_profile, asking, NOW).tokens == 70
    assert window_usage(each_user, asking, NOW).tokens == 60
    assert window_usage(by_profile, asking, NOW + timedelta(days=1)).tokens == 0


def test_the_first_spent_budget_is_reported_counting_the_runs_own_usage(metered):
    factories.configure_policy(budgets=[rule(limit=100)])
    spent_before(metered, tokens=60, at=NOW)
    run = executions.start_execution(executions.create_thread(metered), "now").runs.get()

    assert rules_of(run) == list(parse_budgets([rule(limit=100)]))
    assert first_spent_budget(run, RunUsage(input_tokens=20, output_tokens=19), NOW) is None
    over = first_spent_budget(run, RunUsage(input_tokens=20, output_tokens=20), NOW)
    assert over is not None
    assert (over.spent, over.limit, over.window) == ("100", "100", "day")


def test_a_money_budget_counts_known_costs_and_says_what_it_left_out(metered):
    ModelPrice.objects.create(
        model="demo", valid_from=NOW - timedelta(days=30), input=1000, output=1000, cache_read=0, cache_write=0
    )
    unpriced = factories.profile(name="unpriced", model="openai:gpt-unpriced")
    factories.configure_policy(budgets=[rule(unit="money", limit=1), rule(name="unpriced", unit="money", limit=1)])
    spent_before(metered, tokens=1000, at=NOW)  # 1000 tokens at 1000 per million: 1.0
    spent_before(unpriced, tokens=10**6, at=NOW)
    priced = executions.start_execution(executions.create_thread(metered), "now").runs.get()
    unknown = executions.start_execution(executions.create_thread(unpriced), "now").runs.get()

    lost = executions.start_execution(executions.create_thread(metered), "died").runs.get()
    Run.objects.filter(pk=lost.pk).update(status=RunStatus.FAILED, usage=None, created_at=NOW)

    over = first_spent_budget(priced, RunUsage(), NOW)
    assert over is not None and over.spent == "1.0000 (not counted: 1 run(s) of unknown cost)"
    # Never guessed as 0 silently: not over, and the count of what was left out is there to show.
    assert first_spent_budget(unknown, RunUsage(), NOW) is None
    usage = window_usage(rules_of(unknown)[0], unknown, NOW)
    assert (usage.unknown_runs, usage.known_cost) == (1, 0)


# --- a run over its budget -----------------------------------------------------------------------------------


def suspended_by_budget(metered, user) -> Execution:
    factories.configure_policy(budgets=[rule(limit=100)])
    spent_before(metered, tokens=150, at=datetime.now(UTC))
    execution = executions.start_execution(executions.create_thread(metered), "one more answer", user=user)
    assert runner.execute_run(execution.runs.get().pk) == "suspended"
    return execution


def answer(execution: Execution, verdict: str, user) -> Run:
    execution.thread.refresh_from_db()
    request = DeferredRequest.objects.get(execution=execution)
    submission = submit_decisions(
        execution,
        checkpoint_id=execution.thread.selected_checkpoint_id,
        key=f"budget-{verdict}",
        answers=[Answer(request.tool_call_id, verdict)],
        user=user,
    )
    assert submission.resume_run is not None
    return submission.resume_run


def test_a_run_over_its_budget_does_not_call_the_model_and_waits_for_an_override(metered, operator_user):
    execution = suspended_by_budget(metered, operator_user)

    assert budget_model.CALLS == []
    request = DeferredRequest.objects.get(execution=execution)
    assert (request.tool_name, request.kind) == (OVER_BUDGET_TOOL, DeferredKind.APPROVAL)
    assert request.args == {
        "budget": "profile metered, 100 tokens a day",
        "spent": "150",
        "limit": "100",
        "window": "day",
    }
    assert request.reason.startswith("Over budget (profile metered")
    execution.refresh_from_db()
    assert execution.status == ExecutionStatus.WAITING
    # In the inbox like any approval.
    assert list(answerable_requests(operator_user)) == [request]


def test_the_inbox_and_the_execution_page_show_the_budget_and_what_it_spent(metered, operator_user, client):
    execution = suspended_by_budget(metered, operator_user)
    client.force_login(operator_user)

    for page in (reverse("runs:approvals"), reverse("runs:execution", args=[execution.pk])):
        text = client.get(page).content.decode()
        assert "Over budget (profile metered, 100 tokens a day): spent 150 of 100." in text, page


def test_an_override_allows_exactly_one_more_model_request(metered, operator_user):
    execution = suspended_by_budget(metered, operator_user)

    assert runner.execute_run(answer(execution, Verdict.APPROVED, operator_user).pk) == "completed"

    # One request, and the model saw only the prompt: the budget's call and its override are not its business.
    assert budget_model.CALLS == [1]
    execution.refresh_from_db()
    assert execution.status == ExecutionStatus.COMPLETED
    decision = Decision.objects.get(request__execution=execution)
    assert (decision.verdict, decision.decided_by) == (Verdict.APPROVED, operator_user)
    # The override in the audit export: who allowed which budget's request.
    (line,) = [line for line in csv_lines([decision]) if OVER_BUDGET_TOOL in line]
    assert "approved" in line and operator_user.username in line


def test_a_denied_override_ends_the_run_without_calling_the_model(metered, operator_user):
    execution = suspended_by_budget(metered, operator_user)

    assert runner.execute_run(answer(execution, Verdict.DENIED, operator_user).pk).startswith("failed")

    assert budget_model.CALLS == []
    execution.refresh_from_db()
    assert (execution.status, execution.failure_code) == (ExecutionStatus.FAILED, BUDGET_EXCEEDED)
    assert Decision.objects.get(request__execution=execution).verdict == Verdict.DENIED


def test_a_run_within_its_budget_is_not_stopped(metered):
    factories.configure_policy(budgets=[rule(limit=100)])
    execution = executions.start_execution(executions.create_thread(metered), "hello")

    assert runner.execute_run(execution.runs.get().pk) == "completed"
    assert len(budget_model.CALLS) == 1
