"""The Host's RQ worker class: the job code is imported once, before the worker forks its work-horses.

Without it every forked work-horse imports pydantic-ai and the engine anew while it already holds a run's
lease; preloading keeps the first heartbeat well inside short leases. Selected with
`RQ = {"WORKER_CLASS": "runs.worker.HostWorker"}` in the settings.
"""

from rq import Worker

import runs.jobs  # noqa: F401 - preloaded for every forked work-horse
from runs.services import toolbox


class HostWorker(Worker):
    """An RQ worker whose forked work-horses start with the Host's job code and tool registry loaded."""

    def __init__(self, *args, **kwargs) -> None:
        toolbox.tool_names()
        super().__init__(*args, **kwargs)
