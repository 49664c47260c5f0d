"""What a `RunAgentInput` asks the Host to do: start an execution on a thread, or resume a waiting one.

The thread's own state is the truth: the client's copy of the conversation is only checked against it (its user
messages must be the thread's user prompts, in order) and never fed to the model. A resume answers the open
interrupts through the approval service the browser form uses, with the same permission, set, schema and audit
checks.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ag_ui.core import RunAgentInput, TextInputContent, UserMessage
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.validators import MaxLengthValidator
from django.db import transaction
from django.template.defaultfilters import pluralize
from pydantic_ai.messages import ModelRequest, UserPromptPart

from runs.harness import THREAD_ID_PATTERN
from runs.models import ExecutionStatus, Thread
from runs.services.lifecycle import (
    ANSWER_REFUSED,
    SubmissionRejected,
    can_decide,
    executions,
    pending_requests,
    submit_decisions,
)
from runs.services.store import StartLimited, checkpoints, start_limits
from runs.services.store.access import Action, can, visible_profiles, within_team
from runs.services.timeline import last_position, redactor_for
from runs.validators import MAX_INPUT_CHARS, multi_line_text

from .answers import answers_for
from .errors import Refused

__all__ = ("StreamStart", "begin")

THREAD_ID_MAX = 100
# Refusals of a decision set that are about the thread's current state rather than the request's content.
_STATE_CONFLICTS = frozenset({"stale", "duplicate", "unknown_call", "incomplete", "repeated", "unavailable"})


@dataclass(frozen=True)
class StreamStart:
    """Where the answer's event stream starts: the execution and the last position before its new events."""

    execution_pk: int
    after: int


def begin(
    profile_name: str, run_input: RunAgentInput, user: User, *, team: int | None = None, token: int | None = None
) -> StreamStart:
    """Start or resume, as `run_input` asks, in `team` only if given (a narrowed token's); a start counts against
    the user's and the `token`'s limits. Raises `Refused` (and changes nothing) when it cannot."""
    profile = within_team(visible_profiles(user), team).filter(name=profile_name).first()
    if profile is None:
        # Another team's profile (or one outside a narrowed token's team) is answered like one that does not exist.
        raise Refused(404, "unknown_profile", f"There is no agent profile named {profile_name!r}.")
    if not can(user, Action.START, profile):
        raise Refused(
            403, "forbidden", f"Your role in the team of profile {profile_name!r} does not allow starting work."
        )
    if len(run_input.thread_id) > THREAD_ID_MAX or not re.fullmatch(THREAD_ID_PATTERN, run_input.thread_id):
        raise Refused(
            400,
            "bad_thread_id",
            f"threadId must be a Host thread id (at most {THREAD_ID_MAX} characters matching {THREAD_ID_PATTERN}), "
            "e.g. 'thread-' and 32 hex digits, or 'myapp_42'.",
        )
    user_texts = [_text_of(message) for message in run_input.messages if isinstance(message, UserMessage)]
    # Thread ids are unique per team: another team's thread of this id is not this one, and a new thread of the
    # same id is created here as for any unused id, so the answer never tells that another team uses it.
    thread = Thread.objects.filter(team_id=profile.team_id, thread_id=run_input.thread_id).first()
    if thread is not None and thread.profile_id != profile.pk:
        raise Refused(
            409, "thread_of_other_profile", f"Thread {thread.thread_id} belongs to profile {thread.profile.name!r}."
        )
    if run_input.resume:
        if thread is None:
            raise Refused(409, "nothing_to_resume", f"Thread {run_input.thread_id} does not exist; nothing waits.")
        _check_history(thread, user_texts)
        return _resume(thread, run_input, user)
    if not run_input.messages or not isinstance(run_input.messages[-1], UserMessage):
        raise Refused(400, "no_user_message", "The last message must be the user message to run.")
    prompt = user_texts[-1]
    if not prompt.strip():
        raise Refused(400, "empty_user_message", "The user message to run is empty.")
    _check_prompt(prompt)
    try:
        start_limits.count_start(user.pk, token_pk=token)
    except StartLimited as limited:
        raise Refused(429, "too_many_starts", limited.message, [{"retryAfter": limited.retry_after}]) from limited
    with transaction.atomic():
        if thread is None:
            thread = executions.create_thread(profile, title=prompt[:60], thread_id=run_input.thread_id)
        _check_history(thread, user_texts[:-1])
        try:
            execution = executions.start_execution(thread, prompt, user=user)
        except executions.ReadOnlyThread as exc:
            raise Refused(409, "thread_read_only", f"Thread {thread.thread_id} is an imported copy.") from exc
        except executions.ExecutionBusy as exc:
            waiting = thread.executions.filter(status=ExecutionStatus.WAITING).exists()
            hint = " It waits on interrupts: answer them with `resume`." if waiting else ""
            raise Refused(
                409, "thread_busy", f"Thread {thread.thread_id} already has an active execution.{hint}"
            ) from exc
    return StreamStart(execution.pk, 0)


def _text_of(message: UserMessage) -> str:
    if isinstance(message.content, str):
        return message.content
    texts = [part.text for part in message.content if isinstance(part, TextInputContent)]
    if len(texts) != len(message.content):
        raise Refused(400, "unsupported_content", f"User message {message.id!r}: only text content is supported.")
    return "".join(texts)


def _check_prompt(prompt: str) -> None:
    """The prompt becomes an execution's input: it meets the limits of the forms that start one."""
    try:
        MaxLengthValidator(MAX_INPUT_CHARS)(prompt)
        multi_line_text(prompt)
    except ValidationError as exc:
        code = "user_message_too_long" if exc.code == "max_length" else "user_message_control_character"
        raise Refused(400, code, f"The user message to run: {' '.join(exc.messages)}") from exc


def _check_history(thread: Thread, client_texts: Sequence[str]) -> None:
    """The client's earlier user messages must be the thread's own user prompts, in order."""
    assert thread.selected_checkpoint is not None, "a thread is created with its initial checkpoint selected"
    state = checkpoints.load(thread.selected_checkpoint)
    prompts = [
        part.content
        for message in state.message_history
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, UserPromptPart) and isinstance(part.content, str)
    ]
    # Compared as shown, both sides masked alike: a comparison of real values would answer "match or 409" to a
    # caller guessing a masked secret. The thread's own history is what runs, so a masked difference is harmless.
    shown = redactor_for(executions.current_policy_version(thread.profile.team_id)).text
    held, sent = [shown(text) for text in prompts], [shown(text) for text in client_texts]
    if held != sent:
        # How the histories differ, never what the thread holds: its prompts are real values, unmasked, and the
        # caller may be any token holder who knows the threadId.
        first = next(
            (index for index, pair in enumerate(zip(held, sent, strict=False)) if pair[0] != pair[1]),
            min(len(held), len(sent)),
        )
        raise Refused(
            409,
            "history_mismatch",
            f"The messages do not match thread {thread.thread_id}: it holds {len(prompts)} user "
            f"message{pluralize(len(prompts))} before this one, the request sent {len(client_texts)} that "
            f"differ{pluralize(len(client_texts), 's,')}. They first differ at user message {first} (counting from "
            "0). The thread's own history is used, never the client's; reload the thread (or use a new threadId) "
            "and send only the new user message after it.",
            [{"threadCount": len(prompts), "sentCount": len(client_texts), "firstDifference": first}],
        )


def _resume(thread: Thread, run_input: RunAgentInput, user: User) -> StreamStart:
    execution = thread.executions.filter(status=ExecutionStatus.WAITING).order_by("-number").first()
    requests = pending_requests(execution) if execution is not None else []
    if execution is None or not requests:
        raise Refused(409, "nothing_to_resume", f"Thread {thread.thread_id} has no open interrupts to resume.")
    # Who may answer is decided before what they sent is read, as on the approval page.
    if not can_decide(_fresh(user), execution):
        raise Refused(403, "forbidden", ANSWER_REFUSED)
    answers = answers_for(requests, run_input.resume or [])
    key = "agui-" + hashlib.sha256(f"{thread.thread_id}\0{run_input.run_id}".encode()).hexdigest()[:40]
    # Read before deciding: the resume run may write its first events as soon as the decision commits. What
    # lies between (the decision item) is outside any run and not streamed.
    before = last_position(execution.pk)
    try:
        submit_decisions(
            execution, checkpoint_id=requests[0].checkpoint_id, key=key, answers=answers, user=_fresh(user)
        )
    except PermissionDenied as exc:
        raise Refused(403, "forbidden", str(exc)) from exc
    except SubmissionRejected as exc:
        raise Refused(409 if exc.code in _STATE_CONFLICTS else 400, exc.code, exc.message) from exc
    return StreamStart(execution.pk, before)


def _fresh(user: User) -> User:
    # Permissions are cached per user object; a decision is checked against the current grants.
    return type(user)._default_manager.get(pk=user.pk)
