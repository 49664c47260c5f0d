"""The recovery sweep, above `lifecycle`: dead workers' runs abandoned, their lanes closed and their executions
continued; overdue requests expired; rows it cannot handle given up; its passes noted for /health/; and retention,
which purges finished executions past their team's policy."""

from . import recovery, retention, sweeper_passes
from .retention_estimate import RetentionEstimate, estimate
from .sweep_failures import SWEEP_FAILED
from .sweeper_passes import last_passes

__all__ = ("SWEEP_FAILED", "RetentionEstimate", "estimate", "last_passes", "recovery", "retention", "sweeper_passes")
