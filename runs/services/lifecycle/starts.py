"""The forms that start work (new thread, new execution, fork), made safe to post twice.

Each rendered form carries a one-time submission key. The key's row is inserted first, in the same
transaction as what the post creates, so the database's unique key decides between two posts of the same
form: the repeat creates nothing and gets what the first post created (`Started.repeated`). A refused post
(`StartRefused`, `ExecutionBusy`, `StartLimited`, a checkpoint error) rolls back together with its key, so it can
be fixed (or waited out) and posted again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction

from runs.models import AgentProfile, Checkpoint, Execution, StartSubmission, Thread

from ..store.start_limits import count_start
from ..store.what_if import WhatIfChange
from .executions import ExecutionBusy, ReadOnlyThread, create_thread, start_execution
from .forks import fork_thread
from .what_if import start_what_if

__all__ = (
    "MAX_KEY_LENGTH",
    "StartRefused",
    "Started",
    "earlier_post",
    "fork",
    "new_execution",
    "new_thread",
    "what_if",
)

MAX_KEY_LENGTH = 100


class StartRefused(Exception):
    """A post that cannot be accepted as it is; `message` is meant for the user."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class Started:
    """What a post created (or, when `repeated`, what the first post of the same form created)."""

    thread: Thread
    execution: Execution | None
    repeated: bool = False


def new_thread(key: str, user: Any, *, profile: AgentProfile, title: str, input: str) -> Started:
    """A new thread, and its first execution when `input` is given."""

    def create() -> tuple[Thread, Execution | None]:
        if input:
            count_start(user.pk)
        thread = create_thread(profile, title=title)
        return thread, start_execution(thread, input, user=user) if input else None

    return _once(key, user, create)


def new_execution(key: str, user: Any, *, thread: Thread, input: str) -> Started:
    """The thread's next execution; `ExecutionBusy` if it still has an active one."""

    def create() -> tuple[Thread, Execution | None]:
        count_start(user.pk)
        return thread, start_execution(thread, input, user=user)

    return _once(key, user, create)


def fork(key: str, user: Any, *, checkpoint: Checkpoint, title: str) -> Started:
    """A new thread continuing from `checkpoint`; `checkpoints.CheckpointError` if it cannot be loaded."""
    return _once(key, user, lambda: (fork_thread(checkpoint, title=title, user=user), None))


def what_if(key: str, user: Any, *, checkpoint: Checkpoint, change: WhatIfChange) -> Started:
    """A what-if fork of `checkpoint` with its one `change`, queued; `WhatIfRefused` if it cannot be made."""

    def create() -> tuple[Thread, Execution | None]:
        count_start(user.pk)
        execution = start_what_if(checkpoint, change, user=user)
        return execution.thread, execution

    return _once(key, user, create)


def _once(key: str, user: Any, create: Callable[[], tuple[Thread, Execution | None]]) -> Started:
    if not key or len(key) > MAX_KEY_LENGTH:
        raise StartRefused("The form has no valid submission key; reload the page and submit it again.")
    if (first := earlier_post(key, user)) is not None:
        return first
    try:
        with transaction.atomic():
            submission = StartSubmission.objects.create(key=key, submitted_by=_user_or_none(user))
            thread, execution = create()
            submission.thread, submission.execution = thread, execution
            submission.save(update_fields=["thread", "execution"])
    except ReadOnlyThread:
        raise StartRefused(
            "This thread is a read-only copy imported from a run bundle; fork one of its checkpoints to continue it."
        ) from None
    except (IntegrityError, ExecutionBusy):
        # A concurrent post of the same form committed first (its key row won), or this failure is real.
        if (first := earlier_post(key, user)) is not None:
            return first
        raise
    return Started(thread, execution)


def earlier_post(key: str, user: Any) -> Started | None:
    """What an earlier post of the form with `key` created (as `repeated`), or None if the key is new.

    `StartRefused` if someone else posted it. Each start looks here before it inserts the key's row, and again
    when that insert loses to a concurrent post of the same form.
    """
    submission = StartSubmission.objects.filter(key=key).select_related("thread", "execution").first()
    if submission is None:
        return None
    if submission.submitted_by_id != getattr(_user_or_none(user), "pk", None):
        raise StartRefused("This form was already used by someone else; reload the page and submit it again.")
    assert submission.thread is not None, "a submission's thread is stored in the transaction that creates it"
    return Started(submission.thread, submission.execution, repeated=True)


def _user_or_none(user: Any) -> Any:
    return user if getattr(user, "is_authenticated", False) else None
