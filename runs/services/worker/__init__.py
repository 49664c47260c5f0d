"""The RQ job's run loop, above `lifecycle` (a run's end ends its execution: children started, parent answered):
lease, stream, batched journal and timeline writes (committed together across the loop's runs), checkpoints,
heartbeat and the result; and replays, which run that loop in-process with recorded answers instead of a model
and tools."""

from . import event_loop, loop_lag, replay, runner
from .batching import BatchWriter
from .commit_group import CommitGroup

__all__ = ("BatchWriter", "CommitGroup", "event_loop", "loop_lag", "replay", "runner")
