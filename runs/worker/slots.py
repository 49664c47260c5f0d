"""A worker's job slots: up to `size` RQ jobs run at once as tasks on one event loop.

The loop takes a job (a short blocking dequeue, in a thread) only while a slot is free, and none once draining.
Each job goes through RQ's own bookkeeping — an `Execution` in the StartedJobRegistry while it runs, then
the job's result or failure and the Finished or Failed registry — done in a small thread pool, since every
Redis command may wait out a Redis outage. A job's exception ends only its own task.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import signal
import sys
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

from asgiref.sync import sync_to_async
from django.db import close_old_connections, connections
from rq.exceptions import DequeueTimeout
from rq.executions import Execution
from rq.job import Job
from rq.queue import Queue
from rq.utils import now
from rq.worker.base import WorkerStatus

if TYPE_CHECKING:
    from .host_worker import HostWorker

__all__ = ("JobSlots",)

T = TypeVar("T")

# A dequeue blocks at most this long, so a stop request is noticed within it.
DEQUEUE_SECONDS = 1
# RQ's bookkeeping threads: the dequeue, the heartbeats, and jobs starting and ending.
REDIS_THREADS = 4
# The worker's registration and its jobs' executions are renewed this often (they expire a minute later).
HEARTBEAT_SECONDS = 5.0


class JobSlots:
    def __init__(self, worker: HostWorker, *, size: int, grace_seconds: float) -> None:
        self._worker = worker
        self._size = size
        self._grace_seconds = grace_seconds
        self._running: dict[asyncio.Task[None], tuple[Job, Execution]] = {}
        self._changed = asyncio.Event()
        self._draining = False
        self._grace_over = False
        self._redis = ThreadPoolExecutor(REDIS_THREADS, thread_name_prefix="rq")

    async def serve(self, *, burst: bool, max_jobs: int | None) -> int:
        """Take and run jobs until drained; returns how many were taken."""
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self.drain)
        heartbeats = asyncio.create_task(self._heartbeats())
        taken = 0
        try:
            taken = await self._take_jobs(burst=burst, max_jobs=max_jobs)
        finally:
            # Also when taking jobs failed: the runs in flight get their grace period, then give up their leases.
            self._draining = True
            await self._wind_down(grace=not burst and max_jobs is None)
            heartbeats.cancel()
            for signum in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(signum)
            self._redis.shutdown(wait=False, cancel_futures=True)
        return taken

    async def _take_jobs(self, *, burst: bool, max_jobs: int | None) -> int:
        taken = 0
        while max_jobs is None or taken < max_jobs:
            if not await self._free_slot():
                break
            found = await self._in_thread(self._dequeue, None if burst else DEQUEUE_SECONDS)
            if found is None:
                if burst and not self._running:
                    break
                if burst:
                    await self._next_change()
                continue
            job, queue, execution = found
            if execution is None or self._draining:
                await self._in_thread(self._put_back, job, queue, execution)
                break
            task = asyncio.create_task(self._perform(job, queue, execution), name=f"job {job.id}")
            self._running[task] = (job, execution)
            task.add_done_callback(self._ended)
            taken += 1
        return taken

    def drain(self) -> None:
        """Stop taking jobs (first signal); end the grace period at once (second signal)."""
        self._changed.set()
        if self._draining:
            self._worker.log.warning("Worker %s: stopping now, the grace period cut short", self._worker.name)
            self._grace_over = True
            return
        self._draining = True
        self._worker.log.info(
            "Worker %s: stopping; taking no more jobs, %d running get %s s to finish",
            self._worker.name,
            len(self._running),
            self._grace_seconds,
        )

    async def _free_slot(self) -> bool:
        """Wait until fewer than `size` jobs run; False if draining began meanwhile."""
        while len(self._running) >= self._size and not self._draining:
            await self._next_change()
        return not self._draining

    async def _next_change(self) -> None:
        """Wait until a job ends or a stop signal comes."""
        self._changed.clear()
        await self._changed.wait()

    def _ended(self, task: asyncio.Task[None]) -> None:
        del self._running[task]
        self._changed.set()

    async def _wind_down(self, *, grace: bool) -> None:
        """Let the jobs in flight end: within the grace period when stopping, else (burst, max jobs) however long."""
        if not grace:
            while self._running:
                await self._next_change()
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._grace_seconds):
                while self._running and not self._grace_over:
                    await self._next_change()
        left = list(self._running)
        if left:
            self._worker.log.warning(
                "Worker %s: %d runs still going after the grace period; giving up their leases",
                self._worker.name,
                len(left),
            )
            for task in left:
                task.cancel()
            await asyncio.wait(left)

    async def _perform(self, job: Job, queue: Queue, execution: Execution) -> None:
        """Run one job to its end and record the outcome in RQ; whatever it raises stays with it."""
        try:
            await self._in_thread(self._started, job)
            await sync_to_async(close_old_connections)()
            async with asyncio.timeout(job.timeout if job.timeout and job.timeout > 0 else None):
                value = await _call(job)
        except asyncio.CancelledError:
            await self._in_thread(self._failed, job, queue, execution, sys.exc_info())
            raise
        except Exception:
            await self._in_thread(self._failed, job, queue, execution, sys.exc_info())
        else:
            await self._in_thread(self._succeeded, job, queue, execution, value)

    async def _heartbeats(self) -> None:
        while True:
            await asyncio.sleep(HEARTBEAT_SECONDS)
            try:
                await self._in_thread(self._heartbeat, list(self._running.values()))
            except Exception:
                # The next one may get through; without heartbeats RQ would count the worker and its jobs dead.
                self._worker.log.exception("Worker %s: heartbeat failed", self._worker.name)

    async def _in_thread(self, call: Callable[..., T], *args: Any) -> T:
        result: Awaitable[T] = asyncio.get_running_loop().run_in_executor(self._redis, call, *args)
        return await result

    # What follows runs in the Redis threads.

    def _dequeue(self, timeout: int | None) -> tuple[Job, Queue, Execution | None] | None:
        """The next job, its queue and its RQ execution (none once draining): in one hop, since jobs are taken
        one after another."""
        worker = self._worker
        try:
            found = worker.queue_class.dequeue_any(
                worker._ordered_queues,
                timeout,
                connection=worker.connection,
                job_class=worker.job_class,
                serializer=worker.serializer,
                death_penalty_class=worker.death_penalty_class,
            )
        except DequeueTimeout:
            return None
        if found is None:
            return None
        job, queue = found
        job.redis_server_version = worker.get_redis_server_version()  # type: ignore[no-untyped-call]  # rq
        worker.log.info("Worker %s: %s: %s", worker.name, queue.name, job.id)
        return job, queue, None if self._draining else worker.prepare_execution(job)

    def _put_back(self, job: Job, queue: Queue, execution: Execution | None) -> None:
        """A job dequeued as the worker began to stop goes back to the front of its queue."""
        with self._worker.connection.pipeline() as pipeline:
            if execution is not None:
                execution.delete(job, pipeline=pipeline)
            pipeline.lrem(queue.intermediate_queue_key, 1, job.id)
            queue.push_job_id(job.id, pipeline=pipeline, at_front=True)
            pipeline.execute()

    def _started(self, job: Job) -> None:
        """RQ's start of a job (its execution is in the StartedJobRegistry already): the job marked started."""
        self._worker.prepare_job_execution(job, remove_from_intermediate_queue=len(self._worker.queues) == 1)
        job.started_at = now()

    def _succeeded(self, job: Job, queue: Queue, execution: Execution, value: Any) -> None:
        self._worker._finalize_success(job, queue, execution, value)
        self._idle_if_done()

    def _failed(self, job: Job, queue: Queue, execution: Execution, exc_info: Any) -> None:
        self._worker._finalize_failure(job, queue, execution, exc_info)
        self._idle_if_done()

    def _idle_if_done(self) -> None:
        if not self._worker.executions:
            self._worker.set_state(WorkerStatus.IDLE)

    def _heartbeat(self, running: list[tuple[Job, Execution]]) -> None:
        worker = self._worker
        if not running:
            worker.heartbeat()
        for job, execution in running:
            worker.maintain_heartbeats(job, execution)
        if worker.should_run_maintenance_tasks:
            worker.run_maintenance_tasks()  # type: ignore[no-untyped-call]  # rq leaves it unannotated


async def _call(job: Job) -> Any:
    if inspect.iscoroutinefunction(job.func):
        return await job.func(*job.args, **job.kwargs)
    # A sync job (a bulk operation, a webhook delivery) gets a thread of its own: on the loop it would stall every
    # run, and on the runs' shared database thread it would hold up their writes while it waits on the network.
    return await asyncio.to_thread(_in_own_connections, job.func, job.args, job.kwargs)


def _in_own_connections(func: Callable[..., Any], args: Any, kwargs: dict[str, Any]) -> Any:
    try:
        return func(*args, **kwargs)
    finally:
        # The pool's thread may serve another job later: it keeps no connection of this one's.
        connections.close_all()
