"""Checkpoints: stored `HarnessState` candidates with a digest, and the Thread's selected pointer.

A checkpoint records the state JSON exactly as `HarnessState.model_dump_json()` produced it, its sha256, the
journal index it covers and, beside it, the accepted deferred input that history does not contain yet
(S73–S75). Loading re-checks the digest and validates the state, so an altered row is refused instead of
being continued. The Thread's selected checkpoint moves only forward, and only in a transaction that proves
the writing run still holds its lease.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Q
from pydantic import ValidationError

from runs.harness.deferred import DeferredToolResume
from runs.harness.state import HarnessState
from runs.models import Checkpoint, CheckpointKind, Run, Thread, state_digest

from .codec import decode_resume, encode_resume
from .leases import Lease, verify

__all__ = ("CheckpointError", "create", "load", "pending_input", "record", "select")


class CheckpointError(ValueError):
    """A checkpoint that must not be continued: its digest does not match or its state is invalid."""


def create(
    thread: Thread,
    state: HarnessState,
    *,
    kind: CheckpointKind,
    run: Run | None = None,
    journal_index: int | None = None,
    pending: DeferredToolResume | None = None,
    metadata: dict[str, Any] | None = None,
) -> Checkpoint:
    """Store a checkpoint (no lease check: for a new thread's initial or fork checkpoint, or under `record`)."""
    if state.thread_id != thread.thread_id:
        raise CheckpointError(f"a state of thread {state.thread_id} cannot be a checkpoint of {thread.thread_id}")
    state_json = state.model_dump_json()
    return Checkpoint.objects.create(
        thread=thread,
        run=run,
        kind=kind,
        journal_index=journal_index,
        state_json=state_json,
        digest=state_digest(state_json),
        pending_deferred_input=None if pending is None else encode_resume(pending),
        metadata=metadata or {},
    )


def record(
    run: Run,
    state: HarnessState,
    *,
    lease: Lease,
    kind: CheckpointKind,
    journal_index: int | None,
    pending: DeferredToolResume | None = None,
    metadata: dict[str, Any] | None = None,
    select_it: bool = False,
) -> Checkpoint:
    """Store a checkpoint written by the lease holder; with `select_it`, also move the Thread's pointer to it."""
    thread = run.execution.thread
    with transaction.atomic():
        verify(lease, f"write a {kind} checkpoint")
        checkpoint = create(
            thread, state, kind=kind, run=run, journal_index=journal_index, pending=pending, metadata=metadata
        )
        if select_it:
            select(thread, checkpoint, lease=lease)
    return checkpoint


def select(thread: Thread, checkpoint: Checkpoint, *, lease: Lease) -> None:
    """Inside a transaction: move the pointer forward to `checkpoint` (refused when the lease is lost)."""
    verify(lease, "select a checkpoint")
    moved = (
        Thread.objects.filter(pk=thread.pk)
        .filter(Q(selected_checkpoint__isnull=True) | Q(selected_checkpoint__lt=checkpoint.pk))
        .update(selected_checkpoint=checkpoint)
    )
    if not moved:
        raise CheckpointError(f"thread {thread.pk} already selected a newer checkpoint than {checkpoint.pk}")


def load(checkpoint: Checkpoint) -> HarnessState:
    """The checkpoint's state, after checking its digest and validating it."""
    if state_digest(checkpoint.state_json) != checkpoint.digest:
        raise CheckpointError(
            f"checkpoint {checkpoint.pk} of thread {checkpoint.thread_id} was altered: its digest does not match "
            "the stored state; refusing to continue from it"
        )
    try:
        return HarnessState.model_validate_json(checkpoint.state_json)
    except ValidationError as exc:
        raise CheckpointError(f"checkpoint {checkpoint.pk} holds an invalid state: {exc}") from exc


def pending_input(checkpoint: Checkpoint) -> DeferredToolResume | None:
    """The accepted deferred input stored beside the checkpoint, as a recovery batch (`recovery=True`)."""
    if checkpoint.pending_deferred_input is None:
        return None
    return decode_resume(checkpoint.pending_deferred_input, recovery=True)
