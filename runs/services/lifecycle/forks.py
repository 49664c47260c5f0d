"""Forking: a new Thread that continues from any checkpoint of another, with its own identity."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import transaction

from runs.harness import HarnessState, new_thread_id
from runs.models import BundleMode, Checkpoint, CheckpointKind, Thread

from ..store import checkpoints
from .executions import masked_title

__all__ = ("fork_thread",)


def fork_thread(
    checkpoint: Checkpoint,
    *,
    title: str = "",
    user: Any = None,
    edit: Callable[[HarnessState], HarnessState] | None = None,
) -> Thread:
    """A new Thread whose selected checkpoint is `state.fork()` of `checkpoint` (digest checked first), changed by
    `edit` if given (a what-if's edited history).

    The fork keeps history and capability namespaces and drops environment state; it records its origin in
    `forked_from` and in the fork checkpoint's metadata (with who forked it). No execution is started.
    """
    source = checkpoint.thread
    if source.imported_by is not None and source.imported_by.mode == BundleMode.REDACTED:
        raise checkpoints.CheckpointError(
            "this thread was imported from a redacted bundle, which holds no states: there is nothing to fork from"
        )
    state = checkpoints.load(checkpoint).fork(thread_id=new_thread_id())
    if edit is not None:
        state = edit(state)
    with transaction.atomic():
        thread = Thread.objects.create(
            thread_id=state.thread_id,
            title=masked_title(title, source.team_id) if title else f"Fork of {source}",
            profile=source.profile,
            # A fork stays in its source's team, whatever team the profile moved to since.
            team_id=source.team_id,
            forked_from=checkpoint,
        )
        forked = checkpoints.create(
            thread,
            state,
            kind=CheckpointKind.FORK,
            metadata={
                "forked_from_thread": source.thread_id,
                "forked_from_checkpoint": checkpoint.pk,
                "forked_by": user.get_username() if getattr(user, "is_authenticated", False) else None,
            },
        )
        thread.selected_checkpoint = forked
        thread.save(update_fields=["selected_checkpoint"])
    return thread
