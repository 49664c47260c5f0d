"""The Host's RQ worker: many runs at once on one event loop, riding through a Redis restart.

Selected with `RQ = {"WORKER_CLASS": "runs.worker.HostWorker"}` in the settings; `manage.py rqworker` starts it.
"""

from .host_worker import HostWorker

__all__ = ("HostWorker",)
