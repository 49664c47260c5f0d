"""Pages of the dashboard. Views stay thin: reads come from runs.services.timeline.read_side, actions from the
other services."""

from __future__ import annotations

import json
import tempfile

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.forms import Form, ModelChoiceField
from django.http import (
    FileResponse,
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
    JsonResponse,
    QueryDict,
)
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from runs.forms import (
    TITLE_CHARS,
    CompareForm,
    ExecutionFilterForm,
    ForkForm,
    NewExecutionForm,
    NewThreadForm,
    SavedViewForm,
    ThreadSearchForm,
    UsageForm,
    WhatIfForm,
)
from runs.models import (
    ACTIVE_EXECUTION_STATUSES,
    BulkAction,
    BundleMode,
    Checkpoint,
    Decision,
    Execution,
    ExecutionStatus,
    ExecutionTombstone,
    Run,
    Thread,
    TimelineEvent,
)
from runs.services.lifecycle import (
    answerable_requests,
    bundle_export,
    can_decide,
    cancellation,
    executions,
    failed_recovery,
    starts,
    what_if,
)
from runs.services.reports import (
    ExecutionFilters,
    costs,
    durations,
    execution_page,
    failures,
    provenance,
    run_comparison,
    status_counts,
    timeline_page,
    usage_report,
)
from runs.services.reports.usage_report import CHART_HEIGHT, CHART_WIDTH
from runs.services.store import StartLimited, access, checkpoints, queueing, saved_views
from runs.services.store.access import Action, get_visible_or_404
from runs.services.timeline import read_side
from runs.validators import MAX_INPUT_CHARS

THREADS_PER_PAGE = 25
USAGE_DAYS = 30
CHECKPOINTS_PER_PAGE = 20
EXECUTIONS_PER_PAGE = 25
EXECUTION_LIST_PAGE = 50
RUN_EVENTS_PER_PAGE = 200
LIMITS = {"input": MAX_INPUT_CHARS, "title": TITLE_CHARS}
BUSY_MESSAGE = "This thread already has an active execution; wait for it or cancel it first."
"""Shown as `maxlength` on the forms; the forms enforce them."""


@login_required
def threads(request: HttpRequest) -> HttpResponse:
    filters = ThreadSearchForm(request.GET)
    valid = filters.is_valid()
    search = filters.cleaned_data.get("q", "").strip() if valid else ""
    status = filters.cleaned_data.get("status", "") if valid else ""
    overview = access.scoped(read_side.threads_overview(search=search, status=status), request.user)
    page = Paginator(overview, THREADS_PER_PAGE).get_page(request.GET.get("page"))
    return render(
        request,
        "runs/threads.html",
        {
            "page": page,
            "filters": filters,
            "search": search,
            "status": status,
            "statuses": read_side.THREAD_STATUSES,
            "profiles": access.visible_profiles(request.user, Action.START).order_by("name"),
            "limits": LIMITS,
        },
        # Refused filters are shown with their reasons, and the list is then unfiltered.
        status=200 if valid else 400,
    )


@login_required
def execution_list(request: HttpRequest) -> HttpResponse:
    """Every execution the user may see, newest first, narrowed by the filters in the query string.

    The counts per status read every matching execution, so the page leaves them out: its script fetches them from
    `execution_counts`, and without scripts a link asks for this page with `counts=1`, which counts inline."""
    form = ExecutionFilterForm(request.GET, viewer=request.user)
    filters = form.filters()
    valid = form.is_valid()
    page = execution_page(
        filters,
        EXECUTION_LIST_PAGE,
        after=form.cleaned_data.get("after") if valid else None,
        before=form.cleaned_data.get("before") if valid else None,
    )
    query = _filter_query(request)
    current = request.GET.get("status", "") if valid else ""
    status_links = _status_links(filters, query, current) if request.GET.get("counts") else None
    return render(
        request,
        "runs/executions.html",
        {
            "filters": form,
            "page": page,
            "total": _matching_total(status_links) if status_links is not None else None,
            "status_links": status_links,
            "counts_url": reverse("runs:execution_counts") + (f"?{query.urlencode()}" if valid else ""),
            "with_counts_url": _with(query, counts="1"),
            "older_url": _with(query, after=str(page.older)) if page.older else None,
            "newer_url": _with(query, before=str(page.newer)) if page.newer else None,
            "filter_query": query.urlencode(),
            "filtered": valid and form.is_filtered(),
            "saved_views": saved_views.views_of(request.user),
            "bulk_actions": BulkAction.choices,
        },
        # Refused filters are shown with their reasons, and the list is then unfiltered.
        status=200 if valid else 400,
    )


@login_required
def execution_counts(request: HttpRequest) -> JsonResponse:
    """The executions list's counts per status under the filters in the query string, for the list's script:
    `{"total": how many the filters match, "links": [{"label", "count", "url", "current"}, ...]}`."""
    form = ExecutionFilterForm(request.GET, viewer=request.user)
    if not form.is_valid():
        return JsonResponse({"error": f"These filters are refused: {form.errors.as_text()}"}, status=400)
    links = _status_links(form.filters(), _filter_query(request), request.GET.get("status", ""))
    return JsonResponse(
        {
            "total": _matching_total(links),
            "links": [
                {"label": label, "count": count, "url": url, "current": current} for label, count, url, current in links
            ],
        }
    )


StatusLink = tuple[str, int, str, bool]
"""A link of the counts per status: its label, how many executions it holds, its URL, whether it is the current."""


def _filter_query(request: HttpRequest) -> QueryDict:
    """The list's filters without the page position and the counts switch: what the status links, the cursors and
    a saved view build on."""
    query = request.GET.copy()
    for name in ("after", "before", "counts"):
        query.pop(name, None)
    return query


def _status_links(filters: ExecutionFilters, query: QueryDict, current: str) -> list[StatusLink]:
    counts = status_counts(filters)
    return [
        (label, count, _with(query, status=value), value == current)
        for label, value, count in [
            ("any", "", counts["total"]),
            *((status, status, count) for status, count in counts["statuses"]),
            *((f"waiting for {kind}", f"waiting:{kind}", count) for kind, count in counts["waiting_for"]),
        ]
    ]


def _matching_total(links: list[StatusLink]) -> int:
    """How many the filters match, the status included: what "all matching" acts on."""
    return next(count for _, count, _, current in links if current)


@login_required
@require_POST
def save_view(request: HttpRequest) -> HttpResponse:
    """Save the list's filters under a name (replacing the user's view of that name)."""
    form = SavedViewForm(request.POST, viewer=request.user)
    if not form.is_valid():
        return _refused(request, form, "The view was not saved.")
    try:
        view = saved_views.save_view(request.user, form.cleaned_data["name"], form.cleaned_data["query"])
    except saved_views.SavedViewRefused as refused:
        messages.error(request, refused.message)
        return redirect("runs:executions")
    messages.success(request, f"Saved the view {view.name}.")
    return redirect(f"{reverse('runs:executions')}?{view.query}")


@login_required
@require_POST
def delete_view(request: HttpRequest, pk: int) -> HttpResponse:
    if not saved_views.delete_view(request.user, pk):
        raise Http404("You have no saved view of this number.")
    messages.success(request, "The view was deleted.")
    return redirect("runs:executions")


@login_required
@require_POST
def create_thread(request: HttpRequest) -> HttpResponse:
    form = NewThreadForm(request.POST)
    # A profile the user may not start on is refused like one that does not exist.
    profiles = form.fields["profile"]
    assert isinstance(profiles, ModelChoiceField)
    profiles.queryset = access.visible_profiles(request.user, Action.START).order_by("name")
    if not form.is_valid():
        return _refused(request, form, "The thread was not created.")
    data = form.cleaned_data
    with queueing.reporting() as dispatch:
        try:
            started = starts.new_thread(
                data["submission_key"], request.user, profile=data["profile"], title=data["title"], input=data["input"]
            )
        except starts.StartRefused as refused:
            messages.error(request, refused.message)
            return redirect("runs:threads")
        except StartLimited as limited:
            return _limited(request, form, limited, "The thread was not created.")
    return _started(request, started, dispatch)


@login_required
def thread_detail(request: HttpRequest, pk: int) -> HttpResponse:
    thread = get_visible_or_404(
        Thread.objects.select_related("profile", "selected_checkpoint", "forked_from__thread", "imported_by"),
        request.user,
        pk=pk,
    )
    return _thread_page(request, thread)


def _thread_page(
    request: HttpRequest, thread: Thread, form: NewExecutionForm | None = None, status: int = 200
) -> HttpResponse:
    """The thread's page; with a refused new-execution form, that form as typed with its errors beside it."""
    checkpoints = Paginator(read_side.checkpoints_of(thread), CHECKPOINTS_PER_PAGE).get_page(
        request.GET.get("checkpoints")
    )
    contents = provenance.checkpoint_contents(checkpoints.object_list)
    for checkpoint in checkpoints.object_list:
        checkpoint.contents = contents[checkpoint.pk]  # type: ignore[attr-defined]  # for the template only
    return render(
        request,
        "runs/thread.html",
        {
            "thread": thread,
            "usage": costs.usage_of(Run.objects.filter(execution__thread=thread)),
            "executions": Paginator(read_side.executions_of(thread), EXECUTIONS_PER_PAGE).get_page(
                request.GET.get("executions")
            ),
            "checkpoints": checkpoints,
            "ancestry": read_side.fork_ancestry(thread),
            "origin": provenance.fork_origin(thread),
            "forks": read_side.forks_of(thread),
            "limits": LIMITS,
            "may_hold": access.can(request.user, Action.ADMINISTER, thread),
            # An imported copy is read, never continued.
            "may_start": thread.imported_by_id is None and access.can(request.user, Action.START, thread),
            # A thread runs one execution at a time: while one is active, a new one is refused, and the form says so.
            "busy": thread.executions.filter(status__in=ACTIVE_EXECUTION_STATUSES).order_by("-number").first(),
            "new_execution": form,
        },
        status=status,
    )


def _require(request: HttpRequest, action: Action, obj: Thread | Checkpoint | Execution) -> None:
    """403 for an action the user's role in a team they can see does not allow (what they cannot see is 404)."""
    if not access.can(request.user, action, obj):
        raise PermissionDenied(f"Your role in this team does not allow you to {action}.")


@login_required
@require_POST
def start_execution(request: HttpRequest, pk: int) -> HttpResponse:
    thread = get_visible_or_404(Thread.objects.all(), request.user, pk=pk)
    _require(request, Action.START, thread)
    form = NewExecutionForm(request.POST)
    # Refused, the thread's page comes back with the text as typed and the reason beside the field.
    if not form.is_valid():
        return _thread_page(request, thread, form, status=400)
    with queueing.reporting() as dispatch:
        try:
            started = starts.new_execution(
                form.cleaned_data["submission_key"], request.user, thread=thread, input=form.cleaned_data["input"]
            )
        except starts.StartRefused as refused:
            form.add_error(None, refused.message)
            return _thread_page(request, thread, form, status=400)
        except executions.ExecutionBusy:
            form.add_error("input", BUSY_MESSAGE)
            return _thread_page(request, thread, form, status=409)
        except StartLimited as limited:
            # The thread page keeps what was typed; the limit's message stands beside the field.
            form.add_error(None, limited.message)
            response = _thread_page(request, thread, form, status=429)
            response["Retry-After"] = str(limited.retry_after)
            return response
    return _started(request, started, dispatch)


@login_required
@require_POST
def fork_checkpoint(request: HttpRequest, pk: int) -> HttpResponse:
    checkpoint = get_visible_or_404(Checkpoint.objects.select_related("thread"), request.user, pk=pk)
    _require(request, Action.FORK, checkpoint)
    back = redirect("runs:thread", pk=checkpoint.thread_id)
    form = ForkForm(request.POST)
    if not form.is_valid():
        return _refused(request, form, "Nothing was forked.")
    try:
        started = starts.fork(
            form.cleaned_data["submission_key"], request.user, checkpoint=checkpoint, title=form.cleaned_data["title"]
        )
    except starts.StartRefused as refused:
        messages.error(request, refused.message)
        return back
    except checkpoints.CheckpointError as exc:
        messages.error(request, str(exc))
        return back
    if not started.repeated:
        messages.success(request, f"Forked {checkpoint.thread} at checkpoint {checkpoint.pk}.")
    return _started(request, started)


def _refused(request: HttpRequest, form: Form, outcome: str) -> HttpResponse:
    """A 400 page naming each refused field and why; nothing was changed."""
    return render(request, "runs/bad_input.html", {"form": form, "outcome": outcome}, status=400)


def _limited(request: HttpRequest, form: Form, limited: StartLimited, outcome: str) -> HttpResponse:
    """429: the form refused for the start limit (HARNESS_STARTS_PER_MINUTE); nothing was created or queued."""
    form.add_error(None, limited.message)
    response = render(request, "runs/bad_input.html", {"form": form, "outcome": outcome}, status=429)
    response["Retry-After"] = str(limited.retry_after)
    return response


def _started(
    request: HttpRequest, started: starts.Started, dispatch: queueing.DispatchReport | None = None
) -> HttpResponse:
    """Where a start goes: its execution if it has one, else its thread; with notices about a repeat or the queue."""
    if started.repeated:
        messages.info(request, "This form was already submitted; nothing new was created. This is what it started.")
    if dispatch is not None and dispatch.queue_unreachable:
        messages.warning(request, queueing.UNREACHABLE_NOTICE)
    if started.execution is not None:
        return redirect("runs:execution", pk=started.execution.pk)
    return redirect("runs:thread", pk=started.thread.pk)


@login_required
def execution_detail(request: HttpRequest, pk: int) -> HttpResponse:
    execution = get_visible_or_404(
        Execution.objects.select_related(
            "thread__profile",
            "thread__imported_by",
            "policy_version__policy",
            "cancelled_by",
            "parent_request__execution__thread",
            "replay_of__thread",
        ),
        request.user,
        pk=pk,
    )
    may_hold = access.can(request.user, Action.ADMINISTER, execution)
    tombstone = ExecutionTombstone.objects.filter(execution=execution).first()
    if tombstone is not None:
        return _purged_page(request, execution, tombstone, may_hold=may_hold)
    lanes = read_side.lanes_of(execution)
    runs = [lane.run for lane in lanes]
    recovery = failures.recovered_by(execution, runs)
    # A failure the execution recovered from is named once, as its recovery; only a final one is shown in full.
    failed_run = None if recovery else next((run for run in reversed(runs) if run.failure_code), None)
    times = durations.execution_times(execution, runs)
    now = timezone.now()
    active = durations.active_texts(times, now)
    return render(
        request,
        "runs/execution.html",
        {
            "execution": execution,
            "thread": execution.thread,
            "may_hold": may_hold,
            "held_thread": execution.thread if execution.thread.held_at else None,
            "lanes": lanes,
            "lane_heads": [(lane, active.get(lane.run.pk, "")) for lane in lanes],
            "totals": durations.totals(times, runs, now),
            "recovery": recovery,
            "timeline_config": timeline_page.page_config(execution, lanes, times.as_json(now)),
            "timeline_kinds": timeline_page.TIMELINE_KINDS,
            "failed_run": failed_run,
            # The first execution of a fork says where its history comes from.
            "origin": provenance.fork_origin(execution.thread) if execution.number == 1 else None,
            "failure": failures.failure_of(failed_run) if failed_run else None,
            # Cancelling a waiting execution refuses what it waits on: it needs the role that answers that.
            "may_recover": execution.status == ExecutionStatus.FAILED
            and access.can(request.user, Action.RECOVER, execution),
            "may_cancel": access.can(request.user, Action.CANCEL, execution)
            and (execution.status != ExecutionStatus.WAITING or can_decide(request.user, execution)),
            "dropped_cancel_requests": execution.dropped_cancel_requests.select_related("requested_by", "run"),
            "waiting_for_queue": queueing.waiting_for_queue(execution),
            "may_export_full": request.user.has_perm(bundle_export.FULL_EXPORT_PERMISSION),
            "usage": costs.usage_of(execution.runs.all()),
            "compare_with": run_comparison.suggestions(execution, runs),
            "what_if": what_if.describe(execution),
            "what_if_form": _what_if_form(request, execution),
            # Host-managed children this execution's runs started, each on its own thread.
            "children": Execution.objects.filter(parent_request__execution=execution)
            .select_related("thread", "parent_request")
            .order_by("pk"),
            # After a decision here, where the approver goes on to: the newest request waiting elsewhere.
            "next_waiting": answerable_requests(request.user)
            .exclude(execution=execution)
            .select_related("execution__thread")
            .order_by("-created_at", "-id")
            .first(),
        },
    )


def _what_if_form(request: HttpRequest, execution: Execution) -> WhatIfForm | None:
    """The "What if…" form, for a role that may fork, when the execution has checkpoints to go on from (a redacted
    import's hold no states)."""
    imported = execution.thread.imported_by
    if not access.can(request.user, Action.FORK, execution) or (imported and imported.mode == BundleMode.REDACTED):
        return None
    points = what_if.start_points(execution)
    if not points:
        return None
    return WhatIfForm(initial={"checkpoint": points[-1][0]}, checkpoints=points)


def _purged_page(
    request: HttpRequest, execution: Execution, tombstone: ExecutionTombstone, *, may_hold: bool
) -> HttpResponse:
    """What stays of an execution retention purged (or is purging): its facts, usage, cost and decisions."""
    return render(
        request,
        "runs/execution_purged.html",
        {
            "execution": execution,
            "thread": execution.thread,
            "tombstone": tombstone,
            "may_hold": may_hold,
            "children": Execution.objects.filter(parent_request__execution=execution)
            .select_related("thread")
            .order_by("pk"),
            "decisions": Decision.objects.filter(request__execution=execution)
            .select_related("request", "decided_by")
            .order_by("decided_at", "pk"),
        },
    )


@login_required
def compare(request: HttpRequest) -> HttpResponse:
    """Two runs of any executions the user may see, lined up step by step with their first divergence."""
    form = CompareForm(request.GET)
    if not form.is_valid():
        return _refused(request, form, "A comparison needs two runs, a and b.")
    runs = Run.objects.select_related("execution__thread__forked_from", "start_checkpoint", "policy_version")
    # Either run outside the user's teams is the same plain 404 as a run that does not exist.
    a = get_visible_or_404(runs, request.user, **form.cleaned_data["a"])
    b = get_visible_or_404(runs, request.user, **form.cleaned_data["b"])
    comparison = run_comparison.compare_runs(a, b)
    return render(request, "runs/compare.html", {"comparison": comparison, "differences": comparison.differences()})


@login_required
def execution_times(request: HttpRequest, pk: int) -> JsonResponse:
    """The execution's duration model, which the page fetches again whenever a run starts or ends."""
    execution = get_visible_or_404(Execution.objects.all(), request.user, pk=pk)
    return JsonResponse(durations.execution_times(execution).as_json(timezone.now()))


@login_required
@require_POST
def cancel_execution(request: HttpRequest, pk: int) -> HttpResponse:
    """Cancel an active execution (an operator's); a waiting one needs the role that answers its open set (an
    approver's when it holds an approval), else 403."""
    execution = get_visible_or_404(Execution.objects.all(), request.user, pk=pk)
    _require(request, Action.CANCEL, execution)
    waiting = execution.status == ExecutionStatus.WAITING
    if cancellation.cancel_execution(execution, user=request.user):
        messages.success(
            request,
            "Cancelled; the requests it waited on are closed."
            if waiting
            else "Cancellation requested; the run stops at its next heartbeat (unless it suspends for answers "
            "first: then the request is dropped, and cancelling the waiting execution is a decision).",
        )
    return redirect("runs:execution", pk=execution.pk)


@login_required
@require_POST
def recover_execution(request: HttpRequest, pk: int) -> HttpResponse:
    """Start the recovery run of a failed execution (an operator's); one no longer failed is left as it is."""
    execution = get_visible_or_404(Execution.objects.all(), request.user, pk=pk)
    _require(request, Action.RECOVER, execution)
    try:
        run = failed_recovery.recover_failed(execution, user=request.user)
    except failed_recovery.RecoveryRefused as refused:
        messages.error(request, f"Not recovered: {refused}")
    else:
        if run is None:
            messages.info(request, "It is no longer failed; nothing was done.")
        else:
            messages.success(request, f"Recovery run {run.number} is queued; it continues from the latest checkpoint.")
    return redirect("runs:execution", pk=execution.pk)


@login_required
@require_POST
def export_bundle(request: HttpRequest, pk: int) -> HttpResponse | FileResponse:
    """The execution's tree as a run bundle file (redacted, or full with the permission); every export is recorded."""
    execution = get_visible_or_404(Execution.objects.select_related("thread"), request.user, pk=pk)
    try:
        mode = BundleMode(request.POST.get("mode", BundleMode.REDACTED))
    except ValueError:
        return HttpResponseBadRequest("The mode is redacted or full.")
    # The response closes (and so removes) the file once it is sent.
    target = tempfile.TemporaryFile()  # noqa: SIM115
    try:
        transfer = bundle_export.export_bundle(execution, target, mode=mode, user=request.user)
    except bundle_export.ExportRefused as refused:
        target.close()
        messages.error(request, f"Nothing was exported: {refused}.")
        return redirect("runs:execution", pk=execution.pk)
    target.seek(0)
    name = f"{execution.thread.thread_id}-{execution.number}-{transfer.mode}.harness-bundle.zip"
    return FileResponse(target, as_attachment=True, filename=name, content_type="application/zip")


@login_required
def run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_visible_or_404(
        Run.objects.select_related("execution__thread", "previous_run", "policy_version"), request.user, pk=pk
    )
    events = Paginator(read_side.run_events(run), RUN_EVENTS_PER_PAGE).get_page(request.GET.get("page"))
    return render(
        request,
        "runs/run.html",
        {
            "run": run,
            "execution": run.execution,
            "thread": run.execution.thread,
            "duration": durations.run_active_text(run),
            "events": events,
            "checkpoints": read_side.checkpoints_of(run),
            "deferred_requests": read_side.deferred_requests_of(run),
            "usage_json": _pretty(run.usage),
            "usage": costs.usage_of(Run.objects.filter(pk=run.pk)),
            "failure": failures.failure_of(run),
        },
    )


@login_required
def event_detail(request: HttpRequest, execution_pk: int, position: int) -> HttpResponse:
    get_visible_or_404(Execution.objects.all(), request.user, pk=execution_pk)
    try:
        event = read_side.timeline_event(execution_pk, position)
    except TimelineEvent.DoesNotExist:
        raise Http404("No event at this position.") from None
    frame = read_side.socket_frame_of(event)
    if request.GET.get("format") == "json":
        return JsonResponse(frame)
    return render(
        request,
        "runs/event.html",
        {
            "event": event,
            "execution": event.execution,
            "thread": event.execution.thread,
            "frame_json": _pretty(frame),
            "previous": position - 1 if position > 1 else None,
            "next": position + 1 if position < read_side.last_position(execution_pk) else None,
        },
    )


def _with(query: QueryDict, **values: str) -> str:
    """`query` with these values set (an empty one removed), as the query string of a link."""
    changed = query.copy()
    for name, value in values.items():
        changed.pop(name, None)
        if value:
            changed[name] = value
    return f"?{changed.urlencode()}"


def _pretty(value: object) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


@login_required
def usage(request: HttpRequest) -> HttpResponse:
    """Tokens and cost of the user's teams' runs over the last days, by day, profile, user and model."""
    filters = UsageForm(request.GET)
    valid = filters.is_valid()
    days = (filters.cleaned_data.get("days") if valid else None) or USAGE_DAYS
    report = usage_report(request.user, days)
    return render(
        request,
        "runs/usage.html",
        {"filters": filters, "report": report, "chart": {"width": CHART_WIDTH, "height": CHART_HEIGHT}},
        # A refused window is named on the page, which then shows the default one.
        status=200 if valid else 400,
    )
