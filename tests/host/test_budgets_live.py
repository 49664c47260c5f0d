"""A budget on real processes: an RQ worker's run is suspended by its profile's spent budget, an approver's
override (the decision service the execution page posts to) resumes it, and the worker completes it."""

from __future__ import annotations

import pytest
from django.utils import timezone

from runs.harness import OVER_BUDGET_TOOL
from runs.models import Decision, DeferredRequest, Execution, ExecutionStatus, Run, RunStatus, Verdict
from runs.services.lifecycle import Answer, executions, submit_decisions
from tests.support import budget_model, factories
from tests.support.services import RQWorker, running, service_env, wait_until

pytestmark = pytest.mark.services

BUDGET_MODEL = {"HARNESS_DEMO_MODEL": "tests.support.budget_model.model"}


@pytest.fixture
def metered_worker_env(settings, transactional_db, redis_settings):
    """The environment of a worker on the budget model, on this process's redis database (the session stack's
    worker listens on another)."""
    return service_env(redis_url=redis_settings.url, database_name=settings.DATABASES["default"]["NAME"]) | BUDGET_MODEL


def status_of(execution: Execution) -> str:
    return Execution.objects.get(pk=execution.pk).status


def test_a_run_suspended_by_its_budget_is_resumed_by_an_override_and_completes(metered_worker_env, operator_user):
    profile = factories.profile(name="metered", model="demo")
    factories.configure_policy(
        budgets=[{"scope": "profile", "name": "metered", "window": "day", "unit": "tokens", "limit": 100}]
    )
    earlier = executions.start_execution(executions.create_thread(profile), "earlier", user=operator_user)
    # Spent before the worker starts: its run is no longer queued, so the worker skips its job.
    Run.objects.filter(execution=earlier).update(
        status=RunStatus.COMPLETED, usage={"input_tokens": 80, "output_tokens": 40}, created_at=timezone.now()
    )
    Execution.objects.filter(pk=earlier.pk).update(status=ExecutionStatus.COMPLETED)

    with running(RQWorker(metered_worker_env)):
        execution = executions.start_execution(executions.create_thread(profile), "one more", user=operator_user)
        wait_until(lambda: status_of(execution) == ExecutionStatus.WAITING, timeout=120, what="the budget's suspension")
        request = DeferredRequest.objects.get(execution=execution)
        assert request.tool_name == OVER_BUDGET_TOOL
        assert request.args["spent"] == "120"
        execution.thread.refresh_from_db()

        submit_decisions(
            execution,
            checkpoint_id=execution.thread.selected_checkpoint_id,
            key="live-override",
            answers=[Answer(request.tool_call_id, Verdict.APPROVED)],
            user=operator_user,
        )
        wait_until(
            lambda: status_of(execution) == ExecutionStatus.COMPLETED,
            timeout=120,
            what="the resumed run's end",
        )

    resumed = Run.objects.filter(execution=execution).order_by("number").last()
    assert resumed is not None and resumed.output == budget_model.REPLY
    assert Decision.objects.get(request=request).verdict == Verdict.APPROVED
