"""Making a what-if fork of one of an execution's checkpoints: an operator's action (the role that starts work)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from runs.forms import WhatIfForm
from runs.models import Checkpoint, Execution
from runs.services.lifecycle import starts, what_if
from runs.services.store import StartLimited, WhatIfRefused, access, queueing
from runs.services.store.access import Action, get_visible_or_404


@login_required
@require_POST
def make_what_if(request: HttpRequest, pk: int) -> HttpResponse:
    execution = get_visible_or_404(Execution.objects.select_related("thread"), request.user, pk=pk)
    if not access.can(request.user, Action.FORK, execution):
        raise PermissionDenied("Your role in this team does not allow you to fork.")
    form = WhatIfForm(request.POST, checkpoints=what_if.start_points(execution))
    if not form.is_valid():
        return _refused(request, form)
    checkpoint = get_object_or_404(Checkpoint, pk=form.cleaned_data["checkpoint"], run__execution=execution)
    with queueing.reporting() as dispatch:
        try:
            started = starts.what_if(
                form.cleaned_data["submission_key"],
                request.user,
                checkpoint=checkpoint,
                change=form.cleaned_data["change"],
            )
        except (WhatIfRefused, starts.StartRefused) as refused:
            form.add_error(None, refused.message)
            return _refused(request, form)
        except StartLimited as limited:
            form.add_error(None, limited.message)
            response = _refused(request, form, status=429)
            response["Retry-After"] = str(limited.retry_after)
            return response
    assert started.execution is not None, "a what-if always starts its execution"
    if started.repeated:
        messages.info(request, "This form was already submitted; nothing new was created. This is what it started.")
    else:
        messages.success(request, f"Started the {what_if.describe(started.execution)}.")
    if dispatch.queue_unreachable:
        messages.warning(request, queueing.UNREACHABLE_NOTICE)
    return redirect("runs:execution", pk=started.execution.pk)


def _refused(request: HttpRequest, form: WhatIfForm, *, status: int = 400) -> HttpResponse:
    """The fields refused and why; nothing was forked."""
    return render(request, "runs/bad_input.html", {"form": form, "outcome": "Nothing was forked."}, status=status)
