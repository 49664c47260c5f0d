"""Putting a thread or an execution on hold (retention keeps it) and releasing it: a team admin's action."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from runs.models import Execution, Thread
from runs.services.lifecycle import HoldRefused, set_hold
from runs.services.store import access
from runs.services.store.access import Action, get_visible_or_404


def _held(request: HttpRequest) -> bool:
    return request.POST.get("hold") == "on"


def _apply(request: HttpRequest, target: Thread | Execution, what: str) -> None:
    if not access.can(request.user, Action.ADMINISTER, target):
        raise PermissionDenied("Only an admin of the team may put work on hold or release it.")
    held = _held(request)
    try:
        set_hold(target, held=held, user=request.user)
    except HoldRefused as refused:
        messages.error(request, str(refused))
        return
    messages.success(
        request,
        f"The {what} is on hold: retention keeps it until it is released."
        if held
        else f"The {what} is released: retention treats it by the team policy again.",
    )


@login_required
@require_POST
def hold_thread(request: HttpRequest, pk: int) -> HttpResponse:
    thread = get_visible_or_404(Thread.objects.all(), request.user, pk=pk)
    _apply(request, thread, "thread")
    return redirect("runs:thread", pk=thread.pk)


@login_required
@require_POST
def hold_execution(request: HttpRequest, pk: int) -> HttpResponse:
    execution = get_visible_or_404(Execution.objects.all(), request.user, pk=pk)
    _apply(request, execution, "execution")
    return redirect("runs:execution", pk=execution.pk)
