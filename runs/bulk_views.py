"""Bulk actions from the executions list and the approvals inbox: confirm (a count and a sample), start (an RQ
job), follow its progress."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.forms import ValidationError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from runs.forms import BulkForm
from runs.models import BulkAction, BulkOperation, Execution
from runs.services.lifecycle import bulk_operations

SAMPLE_SIZE = 5


@login_required
@require_POST
def bulk_action(request: HttpRequest) -> HttpResponse:
    """Without `confirmed`: the confirmation page (how many, and a sample). With it: start the operation."""
    form = BulkForm(request.POST, viewer=request.user)
    limit = settings.HARNESS_BULK_MAX_ITEMS
    try:
        if not form.is_valid():
            raise ValidationError(form.errors.as_text())
        count, pks = form.executions(limit)
    except ValidationError as refused:
        return _refused(request, " ".join(refused.messages))
    if count == 0:
        return _refused(request, "No execution is selected, or none of them is one you may see.")
    if count > limit:
        return _refused(
            request,
            f"{count} executions match; one bulk action acts on at most {limit} (HARNESS_BULK_MAX_ITEMS). "
            "Narrow the filter and act in parts.",
        )
    action = BulkAction(form.cleaned_data["action"])
    if not form.cleaned_data["confirmed"]:
        sample = Execution.objects.filter(pk__in=pks[:SAMPLE_SIZE]).select_related("thread").order_by("-created_at")
        return render(
            request,
            "runs/bulk_confirm.html",
            {
                "action": action,
                "count": count,
                "sample": sample,
                "pks": pks,
                "message": form.cleaned_data["message"],
                # Where "Cancel" goes back to: the page the action was asked from.
                "back": reverse("runs:approvals" if request.POST.get("origin") == "inbox" else "runs:executions"),
            },
        )
    try:
        operation = bulk_operations.start(request.user, action, pks, message=form.cleaned_data["message"])
    except bulk_operations.BulkRefused as refused:
        return _refused(request, refused.message)
    return redirect("runs:bulk_operation", pk=operation.pk)


def _refused(request: HttpRequest, message: str) -> HttpResponse:
    return render(request, "runs/bulk_refused.html", {"message": message}, status=400)


@login_required
def bulk_operation(request: HttpRequest, pk: int) -> HttpResponse:
    """An operation's progress and per-item results (JSON with ?format=json); only its own user sees it."""
    operation = BulkOperation.objects.filter(pk=pk, user_id=request.user.pk or 0).first()
    if operation is None:
        raise Http404("You started no bulk operation of this number.")
    counts = bulk_operations.progress(operation)
    items = operation.items.select_related("execution__thread").order_by("pk")
    if request.GET.get("format") == "json":
        return JsonResponse(
            {
                "finished": operation.finished_at is not None,
                "counts": counts,
                "items": [
                    {"execution": item.execution_id, "outcome": item.outcome, "message": item.message} for item in items
                ],
            }
        )
    return render(
        request,
        "runs/bulk_operation.html",
        {"operation": operation, "counts": counts, "items": items, "total": sum(counts.values())},
    )
