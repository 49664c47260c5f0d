"""What happened in the Host that people outside the dashboard may want to hear of, as Django signals.

The runs app only announces; other apps (the `alerts` webhooks) listen, so runs never imports them. An event is
sent after the surrounding transaction commits, never inside it: a rolled-back run announces nothing, and a
slow or failing listener can neither hold the run's transaction open nor undo it (`send_robust`; errors are
logged). Events carry primary keys only: a listener reads the committed rows itself.

`sweep_passed` is sent after every pass of the recovery sweep, for listeners that have periodic work of their own
(retries that are due, approvals about to expire).
"""

from __future__ import annotations

import logging
from datetime import datetime
from enum import StrEnum

from django.db import transaction
from django.dispatch import Signal

__all__ = ("HostEvent", "announce", "host_event", "pass_swept", "sweep_passed")

log = logging.getLogger(__name__)


class HostEvent(StrEnum):
    # Keyword arguments sent with each: execution, and the ones named.
    APPROVAL_REQUESTED = "approval.requested"  # checkpoint: the request set's
    APPROVAL_EXPIRING = "approval.expiring"  # checkpoint
    APPROVAL_DECIDED = "approval.decided"  # submission
    EXECUTION_FAILED = "execution.failed"
    EXECUTION_COMPLETED = "execution.completed"
    EXECUTION_RECOVERED = "execution.recovered"  # run: the recovery run


# Sent with `event` (a HostEvent), `execution` (pk) and the event's own primary keys.
host_event = Signal()
# Sent with `now`.
sweep_passed = Signal()


def announce(event: HostEvent, *, execution: int, **keys: int) -> None:
    """Send `event` once the surrounding transaction commits (at once outside one)."""

    def send() -> None:
        for receiver, outcome in host_event.send_robust(sender=HostEvent, event=event, execution=execution, **keys):
            if isinstance(outcome, Exception):
                log.error("%s of execution %s: listener %r failed", event, execution, receiver, exc_info=outcome)

    transaction.on_commit(send)


def pass_swept(now: datetime) -> None:
    for receiver, outcome in sweep_passed.send_robust(sender=HostEvent, now=now):
        if isinstance(outcome, Exception):
            log.error("after the sweep: listener %r failed", receiver, exc_info=outcome)
