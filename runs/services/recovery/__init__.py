"""The recovery sweep, above `lifecycle`: dead workers' runs abandoned, their lanes closed and their executions
continued; overdue requests expired; rows it cannot handle given up; its passes noted for /health/."""

from . import recovery, sweeper_passes
from .sweep_failures import SWEEP_FAILED
from .sweeper_passes import last_passes

__all__ = ("SWEEP_FAILED", "last_passes", "recovery", "sweeper_passes")
