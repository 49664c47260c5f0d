"""Where a thread, an execution and a checkpoint come from, as pages show it: the checkpoint a fork was made
from, the tool calls a run inherited from its start checkpoint, and what each checkpoint holds."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import Count

from runs.models import Checkpoint, Execution, Run, Thread

from ..store import checkpoints

__all__ = ("CheckpointContents", "ForkOrigin", "checkpoint_contents", "fork_origin", "inherited_tool_names")


@dataclass(frozen=True)
class ForkOrigin:
    """A forked thread's source: 'forked from checkpoint N of thread X (run R, at time T)'."""

    checkpoint: Checkpoint
    thread: Thread
    run: Run | None


@dataclass(frozen=True)
class CheckpointContents:
    messages: int
    pending_requests: int
    accepted_input: bool


def fork_origin(thread: Thread) -> ForkOrigin | None:
    if thread.forked_from_id is None:
        return None
    checkpoint = Checkpoint.objects.select_related("thread", "run__execution").get(pk=thread.forked_from_id)
    return ForkOrigin(checkpoint=checkpoint, thread=checkpoint.thread, run=checkpoint.run)


def inherited_tool_names(execution: Execution) -> dict[str, str]:
    """Tool call id -> tool name for the calls of the last model response the first run started from.

    A run that starts from such a checkpoint (a fork of a suspended thread, a resume) returns results of calls
    made before its own events, so the timeline would otherwise know their ids only.
    """
    first = execution.runs.select_related("start_checkpoint").order_by("number").first()
    if first is None or first.start_checkpoint is None:
        return {}
    if (summary := first.start_checkpoint.metadata.get(checkpoints.REDACTED_SUMMARY)) is not None:
        return dict(summary["last_calls"])
    return checkpoints.last_response_calls(checkpoints.load(first.start_checkpoint))


def checkpoint_contents(rows: Iterable[Checkpoint]) -> dict[int, CheckpointContents]:
    """What each checkpoint holds: its number of messages, the requests it waits on, accepted input kept.

    A base holds its whole history; a delta adds its messages to its parent's, so counting walks the parent
    links (each row parsed once) instead of loading and validating every state.
    """
    rows = list(rows)
    counts: dict[int, int] = {}

    def messages(pk: int) -> int:
        chain: list[tuple[Checkpoint, int]] = []  # deltas, each with its parent's pk
        while pk not in counts:
            row = Checkpoint.objects.only("parent_id", "state_json", "history_delta", "metadata").get(pk=pk)
            if (summary := row.metadata.get(checkpoints.REDACTED_SUMMARY)) is not None:
                counts[row.pk] = summary["messages"]
                break
            if row.parent_id is None:
                counts[row.pk] = len(json.loads(row.state_json).get("message_history", []))
                break
            chain.append((row, row.parent_id))
            pk = row.parent_id
        for row, parent_pk in reversed(chain):
            counts[row.pk] = counts[parent_pk] + len(json.loads(row.history_delta or "[]"))
        return counts[chain[0][0].pk] if chain else counts[pk]

    pending = dict(
        Checkpoint.objects.filter(pk__in=[row.pk for row in rows])
        .annotate(requests=Count("deferred_requests"))
        .values_list("pk", "requests")
    )
    return {
        row.pk: CheckpointContents(
            messages=messages(row.pk),
            pending_requests=pending.get(row.pk, 0),
            accepted_input=row.pending_deferred_input is not None,
        )
        for row in rows
    }
