"""How late this process's event loop wakes its sleepers: the sign that one run is starving the others.

Every run's lease heartbeat sleeps between renewals; when it wakes later than it asked, something held the loop
(a sync call on it, CPU-heavy encoding, too many runs for one process). The heartbeat reports the lateness here:
above `WARN_SECONDS` it is logged, and the worst value since the worker's last RQ heartbeat goes into the
worker's registration, where /health/ reads it (runs/worker/host_worker.py, harness_site/health.py).
"""

from __future__ import annotations

import logging

__all__ = ("REGISTRATION_FIELD", "WARN_SECONDS", "note", "take_worst")

log = logging.getLogger(__name__)

# Well above a busy loop's normal jitter, well below the third of a lease that a heartbeat may use up.
WARN_SECONDS = 0.5

# The field of the worker's RQ registration (a Redis hash) that holds it, in seconds.
REGISTRATION_FIELD = "loop_lag"

_worst = 0.0


def note(lag: float, *, run_pk: int) -> None:
    """A heartbeat woke `lag` seconds late."""
    global _worst
    _worst = max(_worst, lag)
    if lag > WARN_SECONDS:
        log.warning("event loop lagging: run %s's heartbeat woke %.2f s late", run_pk, lag)


def take_worst() -> float:
    """The worst lag noted since the last call (0.0 when none)."""
    global _worst
    worst, _worst = _worst, 0.0
    return worst
