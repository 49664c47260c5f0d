"""Approvals pages: the inbox of waiting requests, the decision post, and the audit of decisions and policies."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Any

from asgiref.sync import sync_to_async
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import Count, F, QuerySet
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import redirect, render
from django.template.defaultfilters import pluralize
from django.urls import reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme, urlencode
from django.views.decorators.http import require_http_methods, require_POST

from runs.forms import AuditFilterForm, DecisionSetForm, GroupDecisionForm, new_submission_key
from runs.models import (
    DeferredKind,
    DeferredRequest,
    DeferredStatus,
    Execution,
    ExecutionStatus,
)
from runs.services.lifecycle import (
    ANSWER_REFUSED,
    SubmissionRejected,
    answerable_requests,
    awaiting_approval,
    can_decide,
    group_decisions,
    pending_requests,
    pending_set,
    submit_decisions,
    tool_parameters_schema,
)
from runs.services.lifecycle.group_decisions import GROUP_VERDICTS, Outcome
from runs.services.reports import audit_rows, csv_lines
from runs.services.store import queueing, what_if
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


INBOX_SORTS = {
    "newest": ("-created_at", "-id"),
    "oldest": ("created_at", "id"),
    "expiry": (F("expires_at").asc(nulls_last=True), "created_at", "id"),
    "tool": ("tool_name", "-created_at", "-id"),
}
"""How the inbox may be ordered (?sort=); newest first unless asked."""


@dataclass(frozen=True)
class InboxRow:
    """One open request as the inbox shows it: its arguments masked, and whether its set is this one request
    (then the row itself can approve or deny it)."""

    request: DeferredRequest
    args_json: str
    set_size: int
    age_seconds: int
    expires_in_seconds: int | None

    @property
    def execution_url(self) -> str:
        return execution_url(self.request.execution)

    @property
    def decidable_here(self) -> bool:
        return self.set_size == 1 and self.request.kind == DeferredKind.APPROVAL


@dataclass(frozen=True)
class InboxGroup:
    """Requests on the page with the same tool and the same masked arguments: one decision can answer them."""

    rows: list[InboxRow]

    @property
    def first(self) -> InboxRow:
        return self.rows[0]

    @property
    def request_pks(self) -> str:
        return ",".join(str(row.request.pk) for row in self.rows)


def _inbox_context(request: HttpRequest) -> dict[str, Any]:
    now = timezone.now()
    sort = request.GET.get("sort") or "newest"
    refused_sort = sort not in INBOX_SORTS
    if refused_sort:
        sort = "newest"
    requests = _decidable(request).select_related("execution__thread", "execution__policy_version")
    page = Paginator(requests.order_by(*INBOX_SORTS[sort]), INBOX_PAGE_SIZE).get_page(request.GET.get("page"))
    items: list[DeferredRequest] = list(page.object_list)
    set_sizes = _set_sizes(items)
    groups: dict[tuple[str, str], list[InboxRow]] = {}
    for item in items:
        masked = redactor_for(item.execution.policy_version).value(item.args)
        row = InboxRow(
            request=item,
            args_json=json.dumps(masked, indent=2, ensure_ascii=False, sort_keys=True),
            set_size=set_sizes.get((item.execution_id, item.checkpoint_id), 0),
            age_seconds=int((now - item.created_at).total_seconds()),
            expires_in_seconds=int((item.expires_at - now).total_seconds()) if item.expires_at else None,
        )
        groups.setdefault((item.tool_name, row.args_json), []).append(row)
    return {
        "groups": [InboxGroup(rows) for rows in groups.values()],
        "page": page,
        "sort": sort,
        "sorts": list(INBOX_SORTS),
        "refused_sort": request.GET.get("sort") if refused_sort else None,
        # One key per rendering: a row's or a group's decision posted twice decides nothing twice.
        "submission_key": new_submission_key(),
        # Where a decision from the inbox comes back to: this page of it (also when the table was fetched live).
        "next": f"{reverse('runs:approvals')}?{urlencode({'sort': sort, 'page': str(page.number)})}",
    }


def _set_sizes(items: list[DeferredRequest]) -> dict[tuple[int, int], int]:
    """How many requests an operator answers in each set the page's requests belong to."""
    sets = (
        DeferredRequest.objects.filter(
            execution_id__in={item.execution_id for item in items},
            checkpoint_id__in={item.checkpoint_id for item in items},
            status=DeferredStatus.PENDING,
        )
        .exclude(kind=DeferredKind.CHILD)
        .values("execution_id", "checkpoint_id")
        .annotate(n=Count("id"))
        .order_by()
    )
    return {(row["execution_id"], row["checkpoint_id"]): row["n"] for row in sets}


def _decidable(request: HttpRequest) -> QuerySet[DeferredRequest]:
    """The open requests the user may decide: the inbox and the nav badge count only these."""
    return answerable_requests(request.user)


@login_required
def inbox(request: HttpRequest) -> HttpResponse:
    """Waiting requests the user may decide, across their teams' threads, newest first unless sorted otherwise;
    only open sets (the thread's selected checkpoint)."""
    context = _inbox_context(request)
    # The bulk decision's "on all" button: every execution the inbox holds an approval of, on any page.
    context["inbox_total"] = awaiting_approval(request.user).count()
    return render(request, "runs/approvals.html", context, status=400 if context["refused_sort"] else 200)


@login_required
def inbox_rows(request: HttpRequest) -> HttpResponse:
    """The inbox's table alone (one page of it): what the page fetches when its socket says the open requests
    changed."""
    return render(request, "runs/_approval_rows.html", _inbox_context(request))


@require_POST
@login_required
def decide_group(request: HttpRequest) -> HttpResponse:
    """One decision (approve, or deny with one reason) for each request of a group, each answered alone."""
    form = GroupDecisionForm(request.POST)
    back = _safe_next(request, request.POST.get("next")) or reverse("runs:approvals")
    if not form.is_valid():
        return render(
            request,
            "runs/approvals_rejected.html",
            {"message": f"Nothing was decided: {form.errors.as_text()}", "code": "form_invalid", "back": back},
            status=400,
        )
    data = form.cleaned_data
    with queueing.reporting() as dispatch:
        outcomes = group_decisions.decide_each(
            request.user,
            data["requests"],
            GROUP_VERDICTS[data["choice"]],
            message=data["message"],
            key=data["submission_key"],
        )
    counts = Counter(item.outcome for item in outcomes)
    summary = ", ".join(f"{counts[outcome]} {outcome}" for outcome in Outcome)
    reasons = sorted({item.message for item in outcomes if item.outcome != Outcome.DONE})
    text = f"{GROUP_VERDICTS[data['choice']].capitalize()} for a group of {len(outcomes)}: {summary}."
    if reasons:
        text = f"{text} {' '.join(reasons)}"
    if dispatch.queue_unreachable:
        text = f"{text} {queueing.UNREACHABLE_NOTICE}"
    if request.headers.get("Accept", "").startswith("application/json"):
        return JsonResponse(
            {
                "ok": True,
                "message": text,
                "items": [{"request": o.request_pk, "outcome": o.outcome, "message": o.message} for o in outcomes],
            }
        )
    (messages.success if counts[Outcome.DONE] == len(outcomes) else messages.warning)(request, text)
    return redirect(back)


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
    """Decisions, cancellations, what-if forks and policy versions, newest first, filtered by thread, user and date."""
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
            "what_ifs": [(fork, what_if.describe(fork)) for fork in filters.what_ifs()[:AUDIT_ROWS]],
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
