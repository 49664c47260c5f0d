"""Applying a policy's current redaction patterns to the executions it governed before them, as an RQ job.

An execution is masked by the policy version it started with, and what it stored masked stays as it was
masked: a pattern added later reaches it only through a re-mask. The re-mask rewrites exactly those stored
masked copies (architecture.md, "Everything shown is masked"): the timeline events (what its page, raw events,
sockets on reconnect and exports read), its `shown_input` (lists and search) and its thread's title, each masked
again by the execution's own patterns and the new ones. The journal, checkpoints and decisions keep their real
values, and values masked as they are shown still follow the execution's own version.

`start` records the scope (the policy's executions that exist now) and queues the job after commit; a re-mask
of the policy still unfinished is returned instead of a second one, its job sent again. `run` works execution by
execution, and through each run's events in chunks of `CHUNK_ROWS`, each chunk its own short transaction; after
each execution it moves the cursor and the count, so the page shows progress and a job run again carries on.
Masking what is masked changes nothing: running it twice, or starting it again, leaves the same rows.
"""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import F, Max, QuerySet
from django.utils import timezone

from runs.models import Execution, HostPolicy, Remask, Thread, TimelineEvent

from ..store import queueing
from ..timeline import TimelineRedactor, redactor_of_all

__all__ = ("CHUNK_ROWS", "RemaskRefused", "progress", "run", "start")

CHUNK_ROWS = 500
"""Timeline events read and written per transaction."""


class RemaskRefused(Exception):
    pass


def _scope(policy: HostPolicy) -> QuerySet[Execution]:
    return Execution.objects.filter(policy_version__policy=policy)


def start(policy: HostPolicy, user: User) -> Remask:
    """Record a re-mask of the policy's executions with its current version's patterns, and queue its job."""
    version = policy.current_version
    if version is None or not version.redact_patterns:
        raise RemaskRefused("The policy has no redaction patterns to apply.")
    with transaction.atomic():
        # One at a time per policy: the lock makes two clicks find each other's row.
        HostPolicy.objects.select_for_update().filter(pk=policy.pk).first()
        unfinished = Remask.objects.filter(policy=policy, finished_at__isnull=True).first()
        if unfinished is not None:
            # Its job may have been lost (Redis down, a worker killed): sent again, it carries on from the cursor.
            queueing.enqueue_remask(unfinished.pk)
            return unfinished
        executions = _scope(policy)
        last = executions.aggregate(last=Max("pk"))["last"] or 0
        remask = Remask.objects.create(
            policy=policy, version=version, started_by=user, last_execution=last, total=executions.count()
        )
        queueing.enqueue_remask(remask.pk)
    return remask


def run(remask_pk: int) -> str:
    """The job: every execution in scope after the cursor, in order of primary key."""
    remask = Remask.objects.select_related("version").get(pk=remask_pk)
    executions = (
        _scope(remask.policy)
        .filter(pk__gt=remask.cursor, pk__lte=remask.last_execution)
        .select_related("policy_version")
        .order_by("pk")
    )
    for execution in executions.iterator():
        changed = _remask_execution(execution, remask)
        Remask.objects.filter(pk=remask.pk, cursor__lt=execution.pk).update(
            cursor=execution.pk, done=F("done") + 1, changed_events=F("changed_events") + changed
        )
    Remask.objects.filter(pk=remask.pk, finished_at__isnull=True).update(finished_at=timezone.now())
    return f"re-mask {remask_pk} finished"


def _remask_execution(execution: Execution, remask: Remask) -> int:
    redactor = redactor_of_all(execution.policy_version, remask.version)
    changed = 0
    for run_pk in execution.runs.order_by("number").values_list("pk", flat=True):
        timeline = TimelineRedactor(redactor)
        after = -1
        while True:
            with transaction.atomic():
                rows = list(
                    TimelineEvent.objects.filter(run_id=run_pk, position__gt=after)
                    .order_by("position")
                    .only("pk", "position", "event")[:CHUNK_ROWS]
                )
                masked, taken = timeline.remask([row.event for row in rows])
                if rows and not taken:
                    # One oversized event's pieces fill the chunk: read on until its last piece.
                    rows = list(
                        TimelineEvent.objects.filter(run_id=run_pk, position__gt=after)
                        .order_by("position")
                        .only("pk", "position", "event")
                    )
                    masked, taken = timeline.remask([row.event for row in rows])
                updated = [row for row, event in zip(rows, masked, strict=False) if _replace(row, event)]
                TimelineEvent.objects.bulk_update(updated, ["event"], batch_size=CHUNK_ROWS)
            changed += len(updated)
            if len(rows) < CHUNK_ROWS or not taken:
                break
            after = rows[taken - 1].position
    with transaction.atomic():
        shown = redactor.text(execution.shown_input)
        if shown != execution.shown_input:
            Execution.objects.filter(pk=execution.pk).update(shown_input=shown)
        thread = Thread.objects.only("pk", "title").get(pk=execution.thread_id)
        title = redactor.text(thread.title)
        if title != thread.title:
            Thread.objects.filter(pk=thread.pk).update(title=title)
    return changed


def _replace(row: TimelineEvent, event: dict[str, object]) -> bool:
    if event == row.event:
        return False
    row.event = event
    return True


def progress(remask: Remask) -> dict[str, object]:
    """What the page shows of it while it runs."""
    return {
        "done": remask.done,
        "total": remask.total,
        "finished": remask.finished_at is not None,
        "changed_events": remask.changed_events,
    }
