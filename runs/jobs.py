"""RQ entry points (thin): the work lives in runs.services."""

from runs.services.lifecycle import bulk_operations
from runs.services.worker import runner


def execute_run(run_pk: int) -> str:
    return runner.execute_run(run_pk)


def run_bulk_operation(operation_pk: int) -> str:
    return bulk_operations.run(operation_pk)
