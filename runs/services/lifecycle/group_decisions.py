"""One decision for many requests: the inbox answers a group of identical requests (same tool, same masked
arguments) at once.

Each request is answered exactly as a decision on its own page would be (`submit_decisions`): the approver role
in its team, the checkpoint it was shown for, its set complete. A request whose set holds others is skipped, not
answered in part. Each item's submission key is the operation's key and the request, so a repeated post decides
nothing twice. The outcome of every item is reported: done, skipped (it changed, or its set needs more answers),
or refused (permission).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import PermissionDenied

from runs.models import DeferredKind, DeferredRequest, TeamRole, Verdict

from ..store import access
from .approvals import Answer, SubmissionRejected, submit_decisions

__all__ = ("GROUP_VERDICTS", "ItemOutcome", "Outcome", "decide_each")

GROUP_VERDICTS = {"approve": Verdict.APPROVED, "deny": Verdict.DENIED}


class Outcome(StrEnum):
    DONE = "done"
    SKIPPED = "skipped"
    REFUSED = "refused"


@dataclass(frozen=True)
class ItemOutcome:
    request_pk: int
    outcome: Outcome
    message: str


def decide_each(
    user: User | AnonymousUser, request_pks: Iterable[int], verdict: Verdict, *, message: str, key: str
) -> list[ItemOutcome]:
    """Answer each request alone with `verdict` (and `message` for a denial), in the order given."""
    return [_decide_one(user, pk, verdict, message=message, key=f"{key}-{pk}") for pk in request_pks]


def _decide_one(user: User | AnonymousUser, pk: int, verdict: Verdict, *, message: str, key: str) -> ItemOutcome:
    request = (
        access.scoped(DeferredRequest.objects.select_related("execution__thread"), user, TeamRole.VIEWER)
        .filter(pk=pk)
        .first()
    )
    if request is None:
        # Absent and another team's alike, as everywhere.
        return ItemOutcome(pk, Outcome.REFUSED, "No such request among those you may see.")
    if request.kind != DeferredKind.APPROVAL:
        return ItemOutcome(pk, Outcome.SKIPPED, f"A {request.kind} request is answered on its execution's page.")
    answer = Answer(request.tool_call_id, verdict, message=message if verdict == Verdict.DENIED else "")
    try:
        submit_decisions(request.execution, checkpoint_id=request.checkpoint_id, key=key, answers=[answer], user=user)
    except PermissionDenied:
        return ItemOutcome(pk, Outcome.REFUSED, "Your role in this team does not allow deciding.")
    except SubmissionRejected as rejected:
        return ItemOutcome(pk, Outcome.SKIPPED, rejected.message)
    return ItemOutcome(pk, Outcome.DONE, f"{verdict}.")
