"""Approvals pages: the inbox of waiting requests, the decision post, and the audit of decisions and policies."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Any

from asgiref.sync import sync_to_async
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import redirect, render
from django.template.defaultfilters import pluralize
from django.urls import reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_http_methods

from runs.forms import AuditFilterForm, DecisionSetForm, new_submission_key
from runs.models import (
    DeferredKind,
    DeferredRequest,
    Execution,
    ExecutionStatus,
)
from runs.services.lifecycle import (
    ANSWER_REFUSED,
    SubmissionRejected,
    answerable_requests,
    can_decide,
    pending_requests,
    pending_set,
    submit_decisions,
    tool_parameters_schema,
)
from runs.services.reports import audit_rows, csv_lines
from runs.services.store import queueing
from runs.services.store.access import get_visible_or_404
from runs.services.timeline import redactor_for

AUDIT_ROWS = 200
INBOX_PAGE_SIZE = 50
EXPORT_BATCH_ROWS = 500


def execution_url(execution: Execution) -> str:
    return reverse("runs:execution", args=[execution.pk])


@dataclass(frozen=True)
class PendingRow:
    """One request as the form shows it: its arguments masked by the execution's policy version."""

    index: int
    request: DeferredRequest
    args: Any
    schema_json: str

    @property
    def args_json(self) -> str:
        return json.dumps(self.args, indent=2, ensure_ascii=False)

    @property
    def masked(self) -> bool:
        """Whether the policy hides part of the arguments from the approver."""
        return bool(self.args != self.request.args)

    @property
    def is_approval(self) -> bool:
        return self.request.kind == DeferredKind.APPROVAL

    @property
    def is_external(self) -> bool:
        return self.request.kind == DeferredKind.EXTERNAL

    @property
    def is_question(self) -> bool:
        return self.request.kind == DeferredKind.QUESTION

    @property
    def question(self) -> str:
        args = self.args if isinstance(self.args, dict) else {}
        return str(args.get("question") or args.get("prompt") or "")


def approval_form_context(request: HttpRequest, execution: Execution, *, next_url: str = "") -> dict[str, Any]:
    """What templates/runs/_approval_form.html needs for the execution's open set (empty when none)."""
    waiting = execution.status == ExecutionStatus.WAITING
    pending = pending_requests(execution) if waiting else []
    # Requests a Host-managed child answers: shown with a link to the child, not answered here.
    children = [
        request
        for request in (pending_set(execution) if waiting else [])
        if request.kind == DeferredKind.CHILD and hasattr(request, "child_execution")
    ]
    redactor = redactor_for(execution.policy_version)
    rows = [
        PendingRow(
            index=index,
            request=item,
            args=redactor.value(item.args),
            schema_json=json.dumps(tool_parameters_schema(item.tool_name)),
        )
        for index, item in enumerate(pending)
    ]
    expires = [item.expires_at for item in pending if item.expires_at is not None]
    return {
        "execution": execution,
        "rows": rows,
        "children": children,
        "checkpoint_id": execution.thread.selected_checkpoint_id,
        # One key per rendered form: a double submit or a second post of the same page repeats it.
        "submission_key": new_submission_key(),
        "may_decide": can_decide(request.user, execution),
        "expires_at": min(expires) if expires else None,
        "next": next_url or request.get_full_path(),
    }


def _inbox_context(request: HttpRequest) -> dict[str, Any]:
    now = timezone.now()
    page = Paginator(_decidable(request).select_related("execution__thread"), INBOX_PAGE_SIZE).get_page(
        request.GET.get("page")
    )
    rows = [
        {
            "request": item,
            "age_seconds": int((now - item.created_at).total_seconds()),
            "expires_in_seconds": int((item.expires_at - now).total_seconds()) if item.expires_at else None,
            "execution_url": execution_url(item.execution),
        }
        for item in page.object_list
    ]
    return {"rows": rows, "page": page}


def _decidable(request: HttpRequest) -> QuerySet[DeferredRequest]:
    """The open requests the user may decide: the inbox and the nav badge count only these."""
    return answerable_requests(request.user)


@login_required
def inbox(request: HttpRequest) -> HttpResponse:
    """Waiting requests the user may decide, across their teams' threads, oldest first; only open sets (the
    thread's selected checkpoint)."""
    return render(request, "runs/approvals.html", _inbox_context(request))


@login_required
def inbox_rows(request: HttpRequest) -> HttpResponse:
    """The inbox's table alone (one page of it): what the page fetches when its socket says the open requests
    changed."""
    return render(request, "runs/_approval_rows.html", _inbox_context(request))


@require_http_methods(["GET", "POST"])
@login_required
def decide(request: HttpRequest, execution_pk: int) -> HttpResponse:
    """GET: the approval form fragment (for a page that learns live that the execution waits).
    POST: accept one complete decision set, or explain why it was refused and change nothing."""
    execution = get_visible_or_404(Execution.objects.select_related("thread"), request.user, pk=execution_pk)
    if request.method == "GET":
        context = approval_form_context(request, execution, next_url=execution_url(execution))
        return render(request, "runs/_approval_form.html", context)
    if not can_decide(request.user, execution):
        raise PermissionDenied(ANSWER_REFUSED)
    form = DecisionSetForm(request.POST)
    back = _safe_next(request, form.data.get("next")) or execution_url(execution)
    wants_json = request.headers.get("Accept", "").startswith("application/json")
    try:
        if not form.is_valid():
            raise SubmissionRejected(
                "The form is missing its checkpoint or submission key; reload the page.", code="form_invalid"
            )
        with queueing.reporting() as dispatch:
            submission = submit_decisions(
                execution,
                checkpoint_id=form.cleaned_data["checkpoint"],
                key=form.cleaned_data["submission_key"],
                answers=form.answers(),
                user=request.user,
            )
    except SubmissionRejected as rejected:
        status = 409 if rejected.code in {"stale", "duplicate", "expired"} else 400
        if wants_json:
            return JsonResponse({"ok": False, "code": rejected.code, "message": rejected.message}, status=status)
        return render(
            request,
            "runs/approvals_rejected.html",
            {"message": rejected.message, "code": rejected.code, "execution": execution, "back": back},
            status=status,
        )
    run = submission.resume_run
    count = submission.decisions.count()
    then = f"run {run.number} resumes" if run else "the run resumes once its child executions have answered"
    summary = f"Decisions recorded for {count} request{pluralize(count)}; {then}."
    if dispatch.queue_unreachable:
        summary = f"{summary} {queueing.UNREACHABLE_NOTICE}"
    if wants_json:
        return JsonResponse(
            {
                "ok": True,
                "message": summary,
                "run": run.pk if run else None,
                "submission": submission.key,
                "queue_unreachable": dispatch.queue_unreachable,
            }
        )
    if dispatch.queue_unreachable:
        messages.warning(request, summary)
    else:
        messages.success(request, summary)
    return redirect(back)


def _safe_next(request: HttpRequest, candidate: str | None) -> str | None:
    if candidate and url_has_allowed_host_and_scheme(
        candidate, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return candidate
    return None


@login_required
def audit(request: HttpRequest) -> HttpResponse:
    """Decisions, cancellations and policy versions, newest first, filtered by thread, user and date."""
    form = AuditFilterForm(request.GET or None, viewer=request.user)
    filters = form.filters()
    return render(
        request,
        "runs/approvals_audit.html",
        {
            "filters": form,
            "rows": audit_rows(filters.decisions()[:AUDIT_ROWS]),
            "cancellations": filters.cancellations()[:AUDIT_ROWS],
            "dropped_cancel_requests": filters.dropped_cancel_requests()[:AUDIT_ROWS],
            "versions": filters.versions()[:AUDIT_ROWS],
            "export_query": request.GET.urlencode(),
        },
        # Refused filters are shown with their reasons, and the rows are then unfiltered.
        status=400 if form.is_bound and not form.is_valid() else 200,
    )


@login_required
def audit_export(request: HttpRequest) -> HttpResponseBase:
    """The audit's decisions as CSV, with the page's filters and its redaction."""
    form = AuditFilterForm(request.GET or None, viewer=request.user)
    if form.is_bound and not form.is_valid():
        return HttpResponse(f"Invalid filters: {form.errors.as_text()}", status=400, content_type="text/plain")
    # However many decisions match, the export is never held whole: rows are read from one cursor and sent a batch
    # at a time.
    lines = csv_lines(form.filters().decisions().iterator(chunk_size=EXPORT_BATCH_ROWS))
    response = StreamingHttpResponse(_in_batches(lines), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="decisions.csv"'
    return response


async def _in_batches(lines: Iterator[str]) -> AsyncIterator[str]:
    """The lines, joined a batch at a time, for daphne: Django reads a synchronous iterator whole into a list before it
    sends any of it over ASGI. Each batch is read on the request's thread, where the cursor is."""
    read_batch = sync_to_async(lambda: "".join(islice(lines, EXPORT_BATCH_ROWS)))
    while batch := await read_batch():
        yield batch
