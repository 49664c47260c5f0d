"""What the sweeper does with a row it cannot handle: log it, fail it with a clear code, and go on.

One bad row (an out-of-range policy value, an undecodable input) must not stop the sweep of every other row,
pass after pass. Trouble that is not the row's fault — the database or Redis unreachable, SQLite busy — is
not a bad row: the pass stops and the next pass tries the same rows again.
"""

from __future__ import annotations

import logging

from ag_ui.core import RunErrorEvent
from django.db import InterfaceError, OperationalError, transaction
from django.utils import timezone
from redis.exceptions import RedisError

from runs.models import ACTIVE_EXECUTION_STATUSES, Execution, ExecutionStatus, Run, RunStatus, TimelineEvent

from ..lifecycle.children import answer_parent
from ..store.host_events import HostEvent, announce
from ..timeline.projection import store_events
from ..timeline.publishing import publish_execution_status
from ..timeline.redaction import Produced

__all__ = ("SWEEP_FAILED", "give_up", "is_transient")

log = logging.getLogger(__name__)

SWEEP_FAILED = "sweep_failed"
_UNFINISHED_RUN_STATUSES = (RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.ABANDONED)
_TERMINAL_EVENTS = ("RUN_FINISHED", "RUN_ERROR")


def is_transient(error: Exception) -> bool:
    """An outage of a service the sweep needs, rather than a fault of the row it was handling."""
    return isinstance(error, RedisError | OperationalError | InterfaceError)


def give_up(*, execution_pk: int, run_pk: int | None, step: str, error: Exception) -> None:
    """Fail the execution (and its unfinished run) the sweep could not handle, ending the run's open lane."""
    message = f"The recovery sweep could not {step}: {type(error).__name__}: {error}"[:2000]
    log.error("execution %s, run %s: %s", execution_pk, run_pk, message, exc_info=error)
    now = timezone.now()
    with transaction.atomic():
        if run_pk is not None:
            Run.objects.filter(pk=run_pk, status__in=_UNFINISHED_RUN_STATUSES).update(
                status=RunStatus.FAILED,
                lease_token=None,
                lease_expires_at=None,
                finished_at=now,
                failure_code=SWEEP_FAILED,
                failure_message=message,
            )
            _end_open_lane(run_pk, message)
        failed = Execution.objects.filter(pk=execution_pk, status__in=ACTIVE_EXECUTION_STATUSES).update(
            status=ExecutionStatus.FAILED, finished_at=now, failure_code=SWEEP_FAILED, failure_message=message
        )
        publish_execution_status(execution_pk)
        if failed:
            announce(HostEvent.EXECUTION_FAILED, execution=execution_pk)
        answer_parent(execution_pk)


def _end_open_lane(run_pk: int, message: str) -> None:
    """A lane with events but no end gets a plain RUN_ERROR, so no viewer waits on it forever."""
    run = Run.objects.get(pk=run_pk)
    events = TimelineEvent.objects.filter(run=run, subagent_run_id="")
    if events.exists() and not events.filter(event_type__in=_TERMINAL_EVENTS).exists():
        store_events(run, [Produced(None, timezone.now(), RunErrorEvent(message=message, code=SWEEP_FAILED))])
