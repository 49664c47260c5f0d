"""Recovering a failed execution, run in this process: the recovery run starts where the failed run started and
completes the execution; the failed run keeps its failure."""

from __future__ import annotations

import pytest

from runs.models import ExecutionStatus, RunStatus
from runs.services.lifecycle import create_thread, recover_failed
from runs.services.reports import failures
from runs.services.worker import runner
from tests.support import factories

pytestmark = pytest.mark.django_db


def test_a_recovered_failed_execution_completes_in_its_recovery_run(operator_user):
    thread = create_thread(factories.shared_profile("recover-test"), title="broken")
    execution = factories.make_execution(thread, status=ExecutionStatus.FAILED)
    dead = factories.make_run(execution, status=RunStatus.FAILED, failure_code="model_failed")

    run = recover_failed(execution, user=operator_user)
    assert run is not None
    runner.execute_run(run.pk)

    execution.refresh_from_db()
    dead.refresh_from_db()
    assert execution.status == ExecutionStatus.COMPLETED and execution.failure_code == ""
    assert (dead.status, dead.failure_code) == (RunStatus.FAILED, "model_failed")
    assert failures.recovered_by(execution, list(execution.runs.order_by("number"))) == (dead, run)
