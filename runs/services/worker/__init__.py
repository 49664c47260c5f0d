"""The RQ job's run loop, above `lifecycle` (a run's end ends its execution: children started, parent answered):
lease, stream, batched journal and timeline writes, checkpoints, heartbeat and the result; and replays, which run
that loop in-process with recorded answers instead of a model and tools."""

from . import loop_lag, replay, runner
from .batching import BatchWriter

__all__ = ("BatchWriter", "loop_lag", "replay", "runner")
