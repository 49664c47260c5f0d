"""Exporting an execution tree as a run bundle (`store.bundle_format`), redacted or full, and recording it.

The tree is the execution's thread with every execution, and each Host-managed child's thread and each what-if's
original's thread, recursively. A **redacted** bundle holds what the pages show: the timeline (masked when it was
stored), the masked input, and every other value of a run (outputs, arguments, results, messages, a what-if's
change) masked by its execution's policy version; it has no journal and no states. A **full** bundle holds the
journal, the checkpoints' states and the real values, so exporting one needs `runs.export_full_bundle`. Every
export, of either mode, is a `BundleTransfer` row.

An execution still under way (or waiting for answers) is refused: its copy could not be continued, and a bundle of
it would be out of date before it is read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from typing import IO, Any

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.db.models import F, Q, QuerySet
from django.utils import timezone

from runs.models import (
    ACTIVE_EXECUTION_STATUSES,
    AgentProfile,
    BundleDirection,
    BundleMode,
    BundleTransfer,
    Checkpoint,
    Decision,
    DecisionSubmission,
    DeferredRequest,
    Execution,
    HostPolicyVersion,
    JournalEntry,
    Run,
    Thread,
    TimelineEvent,
    ToolDispatch,
)

from ..store import POLICY_VERSION_FIELDS, access, checkpoints
from ..store.bundle_format import BundleError, write_bundle
from ..timeline.redaction import Redactor, redactor_for

__all__ = ("FULL_EXPORT_PERMISSION", "ExportRefused", "export_bundle", "tree_threads")

FULL_EXPORT_PERMISSION = "runs.export_full_bundle"
_BATCH = 2000


class ExportRefused(BundleError):
    """An export that is not allowed or not possible; the message says why."""


def tree_threads(execution: Execution) -> list[Thread]:
    """The execution's thread and the threads of every Host-managed child below it, parents first, and the thread
    of each what-if's original (unless retention purged it), so a what-if's copy still names what it changed."""
    threads = [execution.thread]
    seen = {execution.thread_id}
    index = 0
    while index < len(threads):
        thread = threads[index]
        children = Thread.objects.filter(executions__parent_request__execution__thread=thread)
        originals = Thread.objects.filter(executions__what_ifs__thread=thread, executions__tombstone__isnull=True)
        for related in (children | originals).exclude(pk__in=seen).distinct().order_by("pk"):
            seen.add(related.pk)
            threads.append(related)
        index += 1
    return threads


def _plain(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


def _rows(
    queryset: QuerySet[Any], fields: Iterable[str], change: Callable[[dict[str, Any]], None] | None = None
) -> Iterator[dict[str, Any]]:
    """The rows of `queryset` as plain JSON objects, read a batch at a time; `change` edits each in place."""
    for values in queryset.order_by("pk").values(*fields).iterator(chunk_size=_BATCH):
        row = {name: _plain(value) for name, value in values.items()}
        if change is not None:
            change(row)
        yield row


def _username(user_field: str) -> str:
    return f"{user_field}__username"


class _Masks:
    """The redactor of each execution's policy version, for the values a redacted bundle masks."""

    def __init__(self, executions: QuerySet[Execution]) -> None:
        self._by_execution: dict[int, Redactor] = {}
        versions = {version.pk: version for version in HostPolicyVersion.objects.filter(executions__in=executions)}
        for pk, version_pk in executions.values_list("pk", "policy_version"):
            self._by_execution[pk] = redactor_for(versions[version_pk])

    def of(self, execution_pk: int) -> Redactor:
        return self._by_execution[execution_pk]


def _members(executions: QuerySet[Execution], threads: list[Thread], full: bool) -> dict[str, Iterable[dict[str, Any]]]:
    runs = Run.objects.filter(execution__in=executions)
    requests = DeferredRequest.objects.filter(execution__in=executions)
    masks = _Masks(executions)
    exported = set(executions.values_list("pk", flat=True))

    def masked(execution_key: str, *names: str) -> Callable[[dict[str, Any]], None] | None:
        if full:
            return None

        def change(row: dict[str, Any]) -> None:
            redactor = masks.of(row.pop(execution_key))
            for name in names:
                if isinstance(row[name], str):
                    row[name] = redactor.text(row[name])
                elif row[name] is not None:
                    row[name] = redactor.value(row[name])

        return change

    def execution_row(row: dict[str, Any]) -> None:
        if row["what_if_of"] not in exported:
            row["what_if_of"] = None
        if not full:
            row["input"] = row["shown_input"]
            if row["what_if"] is not None:
                # The change's values (a result, arguments, a message, instructions) are a run's values; its keys
                # say which change it is and stay.
                row["what_if"] = masks.of(row["id"]).value(row["what_if"], keep=frozenset(row["what_if"]))

    # A state holds every value the run saw; a redacted bundle keeps where and when it was taken, and the counts and
    # names the pages show of it, checked as loading it would check it.
    summaries: dict[int, checkpoints.HistorySummary] = {}
    if not full:
        for thread in threads:
            summaries.update(checkpoints.summaries(thread))

    def checkpoint_row(row: dict[str, Any]) -> None:
        if not full:
            summary = summaries[row["id"]].as_json()
            row.update(state_json="", history_delta="", parent=None, base=None, pending_deferred_input=None)
            row["metadata"] = {**row["metadata"], checkpoints.REDACTED_SUMMARY: summary}

    def run_row(row: dict[str, Any]) -> None:
        if not full:
            masks_of = masks.of(row["execution"])
            row["output"] = masks_of.value(row["output"])
            row["failure_message"] = masks_of.text(row["failure_message"])
            row["deferred_resume"] = None

    def with_execution(queryset: QuerySet[Any], path: str) -> QuerySet[Any]:
        return queryset if full else queryset.annotate(_execution=F(path))

    profile_pks = {thread.profile_id for thread in threads}
    return {
        "policy_versions": _rows(
            HostPolicyVersion.objects.filter(
                Q(pk__in=executions.values("policy_version")) | Q(pk__in=runs.values("policy_version"))
            ),
            ["id", "number", *POLICY_VERSION_FIELDS, "created_at", "comment", "policy__name"],
        ),
        "profiles": _rows(
            AgentProfile.objects.filter(pk__in=profile_pks),
            ["id", "name", "model", "base_url", "instructions", "enabled_tools"],
        ),
        "threads": _rows(
            Thread.objects.filter(pk__in=[thread.pk for thread in threads]),
            ["id", "thread_id", "title", "profile", "selected_checkpoint", "forked_from", "created_at", "updated_at"],
        ),
        "executions": _rows(
            executions,
            [
                "id",
                "thread",
                "number",
                "input",
                "shown_input",
                "status",
                "trigger",
                "policy_version",
                _username("created_by"),
                "created_at",
                "finished_at",
                "failure_code",
                "failure_message",
                "cancel_requested",
                _username("cancelled_by"),
                "cancelled_at",
                "parent_request",
                "what_if_of",
                "what_if",
            ],
            execution_row,
        ),
        "runs": _rows(
            runs,
            [
                "id",
                "execution",
                "run_id",
                "number",
                "reason",
                "previous_run",
                "status",
                "attempt",
                "tool_recovery",
                "policy_version",
                "profile_snapshot",
                "start_checkpoint",
                "started_at",
                "finished_at",
                "failure_code",
                "failure_message",
                "output",
                "usage",
                "deferred_resume",
                "created_at",
            ],
            run_row,
        ),
        "journal": _rows(
            JournalEntry.objects.filter(run__in=runs),
            ["run", "index", "source_run_id", "source_sequence", "kind", "occurred_at", "payload", "codec_version"],
        )
        if full
        else (),
        "checkpoints": _rows(
            Checkpoint.objects.filter(thread__in=[thread.pk for thread in threads]),
            [
                "id",
                "thread",
                "run",
                "kind",
                "journal_index",
                "state_json",
                "parent",
                "base",
                "history_delta",
                "pending_deferred_input",
                "metadata",
                "created_at",
            ],
            checkpoint_row,
        ),
        "timeline": _rows(
            TimelineEvent.objects.filter(execution__in=executions),
            [
                "execution",
                "position",
                "run",
                "journal_entry__index",
                "subagent_run_id",
                "origin",
                "event_type",
                "event",
                "occurred_at",
            ],
            None if full else _drop_journal_link,
        ),
        "deferred_requests": _rows(
            with_execution(requests, "execution"),
            [
                "id",
                "execution",
                "run",
                "checkpoint",
                "tool_call_id",
                "tool_name",
                "kind",
                "args",
                "reason",
                "status",
                "created_at",
                "expires_at",
                *(() if full else ("_execution",)),
            ],
            masked("_execution", "args", "reason"),
        ),
        "submissions": _rows(
            DecisionSubmission.objects.filter(execution__in=executions),
            ["id", "key", "execution", "checkpoint", _username("submitted_by"), "submitted_at", "resume_run"],
        ),
        "decisions": _rows(
            with_execution(Decision.objects.filter(request__in=requests), "request__execution"),
            [
                "request",
                "submission",
                "verdict",
                "override_args",
                "approved_args",
                "args_digest",
                "result",
                "message",
                _username("decided_by"),
                "decided_at",
                *(() if full else ("_execution",)),
            ],
            masked("_execution", "override_args", "approved_args", "result", "message"),
        ),
        "tool_dispatches": _rows(
            with_execution(ToolDispatch.objects.filter(run__in=runs), "run__execution"),
            [
                "run",
                "tool_call_id",
                "tool_name",
                "recovery_retryable",
                "args",
                "dispatched_at",
                *(() if full else ("_execution",)),
            ],
            masked("_execution", "args"),
        ),
    }


def _drop_journal_link(row: dict[str, Any]) -> None:
    row["journal_entry__index"] = None


def export_bundle(
    execution: Execution, target: IO[bytes], *, mode: BundleMode, user: User | AnonymousUser | None = None
) -> BundleTransfer:
    """Write the execution's tree to `target` as a bundle and record the export; `ExportRefused` says why not.

    `user` None is the Host itself (a management command); a user needs to see the execution, and for a full bundle
    the `runs.export_full_bundle` permission too."""
    if user is not None:
        if not access.can(user, access.Action.VIEW, execution):
            raise ExportRefused("you may not see this execution")
        if mode == BundleMode.FULL and not user.has_perm(FULL_EXPORT_PERMISSION):
            raise ExportRefused(
                "a full bundle holds the real values of the journal; exporting one needs the permission "
                f"{FULL_EXPORT_PERMISSION}"
            )
    threads = tree_threads(execution)
    executions = Execution.objects.filter(thread__in=[thread.pk for thread in threads])
    if executions.filter(status__in=ACTIVE_EXECUTION_STATUSES).exists():
        raise ExportRefused("an execution of this tree is still under way or waiting; export it once it has ended")
    if executions.filter(tombstone__isnull=False).exists():
        raise ExportRefused("an execution of this tree was purged by retention: its journal and timeline are gone")
    exported_at = timezone.now()
    manifest_sha256 = write_bundle(
        target,
        {
            "host": settings.HARNESS_HOST_NAME,
            "exported_at": exported_at.isoformat(),
            "mode": str(mode),
            "root": {"thread": execution.thread_id, "execution": execution.pk},
        },
        _members(executions, threads, mode == BundleMode.FULL),
    )
    return BundleTransfer.objects.create(
        direction=BundleDirection.EXPORT,
        mode=mode,
        host=settings.HARNESS_HOST_NAME,
        exported_at=exported_at,
        execution=execution,
        team_id=execution.thread.team_id,
        manifest_sha256=manifest_sha256,
        user=user if isinstance(user, User) else None,
    )
