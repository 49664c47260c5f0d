"""RQ entry points (thin): the work lives in runs.services."""

from runs.services.worker import runner


def execute_run(run_pk: int) -> str:
    return runner.execute_run(run_pk)
