"""Checkpoints: stored `HarnessState` candidates in HMAC-chained deltas, and the Thread's selected pointer.

Storing the whole state at every boundary makes checkpoint storage grow with the square of a run, so a writer
that continues a chain stores only what changed: the state without its message history, and the messages
appended since the previous checkpoint (`history_delta`). A whole state (a base) is written for a new chain,
when the history is not an extension of the parent's, and when the chain's deltas since its base outgrow
`BASE_GROWTH` times the base: bases then grow geometrically, so all the bytes of a thread's checkpoints stay
within a small multiple of its final history.

Each row's digest is an HMAC (keyed by `settings.CHECKPOINT_KEY`) of its parent's digest and its own content,
including the accepted deferred input kept beside it. Loading walks the chain from its base,
re-checks every digest and validates the rebuilt state, so an edit of any row of the chain, or a forged row
without the key, is refused instead of being continued. `summaries` gives what pages show of every checkpoint of a
thread with the same checks, each row read and verified once. The Thread's selected checkpoint moves only forward,
and only in a transaction that proves the writing run still holds its lease.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils.crypto import salted_hmac
from pydantic import ValidationError
from pydantic_ai import ModelMessage, ModelMessagesTypeAdapter
from pydantic_ai.messages import ModelResponse

from runs.harness import DeferredToolResume, HarnessState, decode_resume, encode_resume
from runs.models import Checkpoint, CheckpointKind, Run, Thread

from .leases import Lease, verify

__all__ = (
    "BASE_GROWTH",
    "REDACTED_SUMMARY",
    "ChainTip",
    "CheckpointChain",
    "CheckpointError",
    "HistorySummary",
    "create",
    "digest_of",
    "last_response_calls",
    "load",
    "load_chain",
    "pending_input",
    "record",
    "select",
    "summaries",
)

BASE_GROWTH = 2
"""A new base is written once the deltas since the current base would exceed this many times its size."""

REDACTED_SUMMARY = "redacted"
"""The metadata key of a checkpoint imported from a redacted bundle, which holds no state: what pages read of it
(`{"messages": <count>, "last_calls": {<tool call id>: <tool name>}}`), names and counts the timeline shows anyway."""

_DIGEST_SALT = "runs.checkpoint.v2"
_EMPTY_HISTORY = b"[]"


class CheckpointError(ValueError):
    """A checkpoint that must not be continued: a digest in its chain does not match or its state is invalid."""


def digest_of(parent_digest: str, state_json: str, history_delta: str, pending: Any) -> str:
    """The HMAC of a checkpoint row: its parent's digest, its state text, its history delta and pending input.

    JSON text never holds a raw control character, so the unit separator keeps the parts unambiguous; the
    pending input is a JSONField, compared in a canonical form because a database may reorder its keys.
    """
    pending_json = "" if pending is None else json.dumps(pending, sort_keys=True, separators=(",", ":"))
    message = "\x1f".join((parent_digest, state_json, history_delta, pending_json))
    return salted_hmac(_DIGEST_SALT, message, secret=settings.CHECKPOINT_KEY, algorithm="sha256").hexdigest()


@dataclass(frozen=True, slots=True)
class ChainTip:
    """What the next checkpoint of a chain is stored against: the last row and the history it holds."""

    pk: int
    thread_pk: int
    base_pk: int
    digest: str
    history: bytes
    base_bytes: int
    delta_bytes: int


class CheckpointChain:
    """A writer's place in its thread's chain; it moves to each checkpoint stored through it.

    Like the journal writer, a chain whose write failed (or whose transaction rolled back) must not be used
    again: its tip would name a row that does not exist.
    """

    def __init__(self, tip: ChainTip | None = None) -> None:
        self.tip = tip


def _delta(parent: bytes, history: bytes) -> bytes | None:
    """The messages `history` appends to `parent`, as a JSON array; None if it does not extend it.

    Both are pydantic-ai's compact JSON arrays, so an extension is a byte prefix up to the parent's `]`.
    """
    if parent == _EMPTY_HISTORY:
        return history
    head = len(parent) - 1
    if history == parent:
        return _EMPTY_HISTORY
    if len(history) > head and history[head] == ord(",") and history.startswith(memoryview(parent)[:head]):
        return b"[" + history[head + 1 :]
    return None


def _extend(history: bytes, delta: bytes) -> bytes:
    if delta == _EMPTY_HISTORY:
        return history
    if history == _EMPTY_HISTORY:
        return delta
    return history[:-1] + b"," + delta[1:]


def create(
    thread: Thread,
    state: HarnessState,
    *,
    kind: CheckpointKind,
    run: Run | None = None,
    journal_index: int | None = None,
    pending: DeferredToolResume | None = None,
    metadata: dict[str, Any] | None = None,
    chain: CheckpointChain | None = None,
) -> Checkpoint:
    """Store a checkpoint (no lease check: for a new thread's initial or fork checkpoint, or under `record`).

    With a `chain` whose tip is a checkpoint of the same thread, the state is stored as a delta when it
    extends the tip's history and the chain is still small enough; otherwise it starts a new base.
    """
    if state.thread_id != thread.thread_id:
        raise CheckpointError(f"a state of thread {state.thread_id} cannot be a checkpoint of {thread.thread_id}")
    history = state.message_history_json
    pending_json = None if pending is None else encode_resume(pending)
    tip = chain.tip if chain is not None and chain.tip is not None and chain.tip.thread_pk == thread.pk else None
    delta = None if tip is None else _delta(tip.history, history)
    if tip is not None and delta is not None:
        envelope = state.model_dump_json(exclude={"message_history"})
        delta_text = delta.decode()
        size = len(envelope) + len(delta_text)
        if tip.delta_bytes + size <= BASE_GROWTH * tip.base_bytes:
            checkpoint = _insert(
                thread, run, kind, journal_index, pending_json, metadata, envelope, delta_text, parent=tip
            )
            new_tip = ChainTip(
                checkpoint.pk,
                thread.pk,
                tip.base_pk,
                checkpoint.digest,
                history,
                tip.base_bytes,
                tip.delta_bytes + size,
            )
            assert chain is not None, "the tip came from the chain"
            chain.tip = new_tip
            return checkpoint
    state_json = state.model_dump_json()
    checkpoint = _insert(thread, run, kind, journal_index, pending_json, metadata, state_json, "", parent=None)
    if chain is not None:
        chain.tip = ChainTip(checkpoint.pk, thread.pk, checkpoint.pk, checkpoint.digest, history, len(state_json), 0)
    return checkpoint


def _insert(
    thread: Thread,
    run: Run | None,
    kind: CheckpointKind,
    journal_index: int | None,
    pending_json: Any,
    metadata: dict[str, Any] | None,
    state_json: str,
    history_delta: str,
    *,
    parent: ChainTip | None,
) -> Checkpoint:
    return Checkpoint.objects.create(
        thread=thread,
        run=run,
        kind=kind,
        journal_index=journal_index,
        state_json=state_json,
        history_delta=history_delta,
        parent_id=None if parent is None else parent.pk,
        base_id=None if parent is None else parent.base_pk,
        digest=digest_of("" if parent is None else parent.digest, state_json, history_delta, pending_json),
        pending_deferred_input=pending_json,
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
    chain: CheckpointChain | None = None,
) -> Checkpoint:
    """Store a checkpoint written by the lease holder; with `select_it`, also move the Thread's pointer to it."""
    thread = run.execution.thread
    with transaction.atomic():
        verify(lease, f"write a {kind} checkpoint")
        checkpoint = create(
            thread,
            state,
            kind=kind,
            run=run,
            journal_index=journal_index,
            pending=pending,
            metadata=metadata,
            chain=chain,
        )
        if select_it:
            # The lease was checked above, in this transaction, which holds the run's row.
            _move_pointer(thread, checkpoint)
    return checkpoint


def select(thread: Thread, checkpoint: Checkpoint, *, lease: Lease) -> None:
    """Inside a transaction: move the pointer forward to `checkpoint` (refused when the lease is lost)."""
    verify(lease, "select a checkpoint")
    _move_pointer(thread, checkpoint)


def _move_pointer(thread: Thread, checkpoint: Checkpoint) -> None:
    moved = (
        Thread.objects.filter(pk=thread.pk)
        .filter(Q(selected_checkpoint__isnull=True) | Q(selected_checkpoint__lt=checkpoint.pk))
        .update(selected_checkpoint=checkpoint)
    )
    if not moved:
        raise CheckpointError(f"thread {thread.pk} already selected a newer checkpoint than {checkpoint.pk}")


_CHAIN_FIELDS = (
    "pk",
    "thread_id",
    "parent_id",
    "base_id",
    "state_json",
    "history_delta",
    "digest",
    "pending_deferred_input",
)


def _chain_rows(checkpoint: Checkpoint) -> list[Checkpoint]:
    """The rows from the chain's base to `checkpoint`, in order, read in one query."""
    if checkpoint.base_id is None:
        return [checkpoint]
    rows = {
        row.pk: row
        for row in Checkpoint.objects.filter(Q(pk=checkpoint.base_id) | Q(base_id=checkpoint.base_id))
        .filter(pk__lt=checkpoint.pk)
        .only(*_CHAIN_FIELDS)
    }
    chain = [checkpoint]
    while chain[-1].parent_id is not None:
        parent = rows.get(chain[-1].parent_id)
        if parent is None or parent.thread_id != checkpoint.thread_id:
            raise CheckpointError(
                f"checkpoint {checkpoint.pk} of thread {checkpoint.thread_id} was altered: its chain is broken at "
                f"checkpoint {chain[-1].pk}; refusing to continue from it"
            )
        chain.append(parent)
    chain.reverse()
    return chain


def _verify(row: Checkpoint, parent_digest: str, checkpoint: Checkpoint) -> None:
    """Refuse `checkpoint` unless `row` of its chain (the row itself or one before it) has the digest it was stored
    with after `parent_digest`."""
    expected = digest_of(parent_digest, row.state_json, row.history_delta, row.pending_deferred_input)
    if not hmac.compare_digest(expected, row.digest):
        where = "" if row.pk == checkpoint.pk else f" (at checkpoint {row.pk} of its chain)"
        raise CheckpointError(
            f"checkpoint {checkpoint.pk} of thread {checkpoint.thread_id} was altered{where}: its digest does not "
            "match the stored state; refusing to continue from it"
        )


def _invalid(checkpoint: Checkpoint, exc: Exception) -> CheckpointError:
    return CheckpointError(f"checkpoint {checkpoint.pk} holds an invalid state: {exc}")


def load_chain(checkpoint: Checkpoint) -> tuple[HarnessState, ChainTip]:
    """The checkpoint's state after checking every digest of its chain and validating it, and its chain tip."""
    rows = _chain_rows(checkpoint)
    parent_digest = ""
    for row in rows:
        _verify(row, parent_digest, checkpoint)
        parent_digest = row.digest
    base, deltas = rows[0], rows[1:]
    try:
        state = HarnessState.model_validate_json(base.state_json)
        if deltas:
            history = state.message_history_json
            for row in deltas:
                history = _extend(history, row.history_delta.encode())
            envelope = json.loads(deltas[-1].state_json)
            state = HarnessState.model_validate({**envelope, "message_history": json.loads(history)})
    except (ValidationError, ValueError) as exc:
        raise _invalid(checkpoint, exc) from exc
    tip = ChainTip(
        pk=checkpoint.pk,
        thread_pk=checkpoint.thread_id,
        base_pk=base.pk,
        digest=checkpoint.digest,
        history=state.message_history_json,
        base_bytes=len(base.state_json),
        delta_bytes=sum(len(row.state_json) + len(row.history_delta) for row in deltas),
    )
    return state, tip


def load(checkpoint: Checkpoint) -> HarnessState:
    """The checkpoint's state, after checking the digests of its chain and validating it."""
    return load_chain(checkpoint)[0]


@dataclass(frozen=True, slots=True)
class HistorySummary:
    """What pages show of a checkpoint's state: its number of messages and the calls of its last model response
    (tool call id -> tool name), as `REDACTED_SUMMARY` keeps them."""

    messages: int
    last_calls: dict[str, str]

    def as_json(self) -> dict[str, Any]:
        return {"messages": self.messages, "last_calls": dict(self.last_calls)}


@dataclass(frozen=True, slots=True)
class _Walked:
    """A checkpoint `summaries` has passed: what a delta stored after it needs to be checked and summed."""

    parent_id: int | None
    base_id: int | None
    digest: str
    summary: HistorySummary


def _summary_of(state: HarnessState) -> HistorySummary:
    messages = state.message_history
    return HistorySummary(len(messages), _last_calls(messages) or {})


def _continues(row: Checkpoint, parent: _Walked) -> bool:
    """Whether `load` would rebuild `row` as its parent's chain plus `row` (the shape the writer stores): the parent
    is of the row's chain, as the chain's base or one of its deltas."""
    if parent.base_id == row.base_id:
        return True
    return row.parent_id == row.base_id and parent.parent_id is None


def summaries(thread: Thread) -> dict[int, HistorySummary]:
    """Checkpoint pk -> the summary of its state, for every checkpoint of the thread, refusing an altered or invalid
    one as `load` would.

    Loading each checkpoint would rebuild and check its whole chain again, which is quadratic in a run's length.
    Here rows are walked in order, so a delta's parent is always passed before it: its digest is checked against
    its parent's, and its summary is its parent's plus its own messages, each row decoded once. A row of any other
    shape (a relinked chain) is loaded instead, with every check of `load`.
    """
    walked: dict[int, _Walked] = {}
    rows = Checkpoint.objects.filter(thread=thread).order_by("pk").only(*_CHAIN_FIELDS)
    for row in rows.iterator(chunk_size=200):
        if row.base_id is None or row.parent_id is None:
            _verify(row, "", row)
            try:
                summary = _summary_of(HarnessState.model_validate_json(row.state_json))
            except (ValidationError, ValueError) as exc:
                raise _invalid(row, exc) from exc
        elif (parent := walked.get(row.parent_id)) is not None and _continues(row, parent):
            _verify(row, parent.digest, row)
            summary = _summed(row, parent.summary)
        else:
            summary = _summary_of(load(row))
        walked[row.pk] = _Walked(row.parent_id, row.base_id, row.digest, summary)
    return {pk: passed.summary for pk, passed in walked.items()}


def _summed(row: Checkpoint, parent: HistorySummary) -> HistorySummary:
    """The summary of a delta: its parent's with its own messages added (its envelope checked as `load` checks it)."""
    try:
        HarnessState.model_validate({**json.loads(row.state_json), "message_history": []})
        added = ModelMessagesTypeAdapter.validate_json(row.history_delta)
    except (ValidationError, ValueError) as exc:
        raise _invalid(row, exc) from exc
    calls = _last_calls(added)
    return HistorySummary(parent.messages + len(added), parent.last_calls if calls is None else calls)


def pending_input(checkpoint: Checkpoint) -> DeferredToolResume | None:
    """The accepted deferred input stored beside the checkpoint, as a recovery batch (`recovery=True`)."""
    if checkpoint.pending_deferred_input is None:
        return None
    return decode_resume(checkpoint.pending_deferred_input, recovery=True)


def last_response_calls(state: HarnessState) -> dict[str, str]:
    """Tool call id -> tool name of the calls of the state's last model response (what a run continuing from it may
    answer without making the calls itself)."""
    return _last_calls(state.message_history) or {}


def _last_calls(messages: Sequence[ModelMessage]) -> dict[str, str] | None:
    """The calls of the last model response of `messages`; None when they hold no response."""
    for message in reversed(messages):
        if isinstance(message, ModelResponse):
            return {call.tool_call_id: call.tool_name for call in message.tool_calls}
    return None
