"""RQ entry points (thin): the work lives in runs.services.

Coroutines: the Host's worker (runs/worker/) runs many of them on one event loop; RQ's own workers run each on
a loop of its own.
"""

from runs.services.lifecycle import bulk_operations, remasking
from runs.services.worker import runner


async def execute_run(run_pk: int) -> str:
    return await runner.aexecute_run(run_pk)


def run_bulk_operation(operation_pk: int) -> str:
    return bulk_operations.run(operation_pk)


def remask_executions(remask_pk: int) -> str:
    return remasking.run(remask_pk)
