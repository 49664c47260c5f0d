"""The RQ job's run loop, above `lifecycle` (a run's end ends its execution: children started, parent answered):
lease, stream, batched journal and timeline writes, checkpoints, heartbeat and the result."""

from . import loop_lag, runner
from .batching import BatchWriter

__all__ = ("BatchWriter", "loop_lag", "runner")
