"""Pages of the dashboard. Views stay thin: reads come from runs.services.timeline, actions from runs.services."""

from __future__ import annotations

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from runs.models import AgentProfile, Checkpoint, Execution, ExecutionStatus, Run, Thread, TimelineEvent
from runs.services import cancellation, checkpoints, executions, forks, timeline
from runs.services.approvals import can_decide

THREADS_PER_PAGE = 25
CHECKPOINTS_PER_PAGE = 20
RUN_EVENTS_PER_PAGE = 200


@login_required
def threads(request: HttpRequest) -> HttpResponse:
    search = request.GET.get("q", "").strip()
    status = request.GET.get("status", "")
    if status not in timeline.THREAD_STATUSES:
        status = ""
    page = Paginator(timeline.threads_overview(search=search, status=status), THREADS_PER_PAGE).get_page(
        request.GET.get("page")
    )
    return render(
        request,
        "runs/threads.html",
        {
            "page": page,
            "search": search,
            "status": status,
            "statuses": timeline.THREAD_STATUSES,
            "profiles": AgentProfile.objects.order_by("name"),
        },
    )


@login_required
@require_POST
def create_thread(request: HttpRequest) -> HttpResponse:
    profile = get_object_or_404(AgentProfile, pk=request.POST.get("profile") or 0)
    text = request.POST.get("input", "").strip()
    thread = executions.create_thread(profile, title=request.POST.get("title", "").strip())
    if not text:
        return redirect("runs:thread", pk=thread.pk)
    execution = executions.start_execution(thread, text, user=request.user)
    return redirect("runs:execution", pk=execution.pk)


@login_required
def thread_detail(request: HttpRequest, pk: int) -> HttpResponse:
    thread = get_object_or_404(
        Thread.objects.select_related("profile", "selected_checkpoint", "forked_from__thread"), pk=pk
    )
    checkpoints = Paginator(timeline.checkpoints_of(thread), CHECKPOINTS_PER_PAGE).get_page(
        request.GET.get("checkpoints")
    )
    return render(
        request,
        "runs/thread.html",
        {
            "thread": thread,
            "executions": timeline.executions_of(thread),
            "checkpoints": checkpoints,
            "ancestry": timeline.fork_ancestry(thread),
            "forks": timeline.forks_of(thread),
        },
    )


@login_required
@require_POST
def start_execution(request: HttpRequest, pk: int) -> HttpResponse:
    thread = get_object_or_404(Thread, pk=pk)
    text = request.POST.get("input", "").strip()
    if not text:
        messages.error(request, "Write what the agent should do.")
        return redirect("runs:thread", pk=thread.pk)
    try:
        execution = executions.start_execution(thread, text, user=request.user)
    except executions.ExecutionBusy:
        messages.error(request, "This thread already has an active execution; wait for it or cancel it first.")
        return redirect("runs:thread", pk=thread.pk)
    return redirect("runs:execution", pk=execution.pk)


@login_required
@require_POST
def fork_checkpoint(request: HttpRequest, pk: int) -> HttpResponse:
    checkpoint = get_object_or_404(Checkpoint.objects.select_related("thread"), pk=pk)
    try:
        fork = forks.fork_thread(checkpoint, title=request.POST.get("title", "").strip(), user=request.user)
    except checkpoints.CheckpointError as exc:
        messages.error(request, str(exc))
        return redirect("runs:thread", pk=checkpoint.thread_id)
    messages.success(request, f"Forked {checkpoint.thread} at checkpoint {checkpoint.pk}.")
    return redirect("runs:thread", pk=fork.pk)


@login_required
def execution_detail(request: HttpRequest, pk: int) -> HttpResponse:
    execution = get_object_or_404(
        Execution.objects.select_related("thread__profile", "policy_version__policy", "cancelled_by"), pk=pk
    )
    lanes = timeline.lanes_of(execution)
    config = {
        "execution": execution.pk,
        "status": execution.status,
        "socket": f"/ws/executions/{execution.pk}/",
        "runs": [lane.summary() for lane in lanes],
        # The script substitutes the position / run pk for the trailing 0.
        "eventUrl": reverse("runs:event", args=[execution.pk, 0]),
        "runUrl": reverse("runs:run", args=[0]),
        "approvalsUrl": reverse("runs:approvals"),
    }
    return render(
        request,
        "runs/execution.html",
        {
            "execution": execution,
            "thread": execution.thread,
            "lanes": lanes,
            "timeline_config": config,
            # Cancelling a waiting execution refuses what it waits on: an approver's decision.
            "may_cancel": execution.status != ExecutionStatus.WAITING or can_decide(request.user),
        },
    )


@login_required
@require_POST
def cancel_execution(request: HttpRequest, pk: int) -> HttpResponse:
    """Cancel an active execution; a waiting one needs runs.decide_deferred (PermissionDenied: 403)."""
    execution = get_object_or_404(Execution, pk=pk)
    waiting = execution.status == ExecutionStatus.WAITING
    if cancellation.cancel_execution(execution, user=request.user):
        messages.success(
            request,
            "Cancelled; the requests it waited on are closed."
            if waiting
            else "Cancellation requested; the run stops at its next heartbeat.",
        )
    return redirect("runs:execution", pk=execution.pk)


@login_required
def run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(Run.objects.select_related("execution__thread", "previous_run", "policy_version"), pk=pk)
    events = Paginator(timeline.run_events(run), RUN_EVENTS_PER_PAGE).get_page(request.GET.get("page"))
    return render(
        request,
        "runs/run.html",
        {
            "run": run,
            "execution": run.execution,
            "thread": run.execution.thread,
            "duration": timeline.format_duration(timeline.run_duration(run)),
            "events": events,
            "checkpoints": timeline.checkpoints_of(run),
            "deferred_requests": timeline.deferred_requests_of(run),
            "usage_json": _pretty(run.usage),
        },
    )


@login_required
def event_detail(request: HttpRequest, execution_pk: int, position: int) -> HttpResponse:
    try:
        event = timeline.timeline_event(execution_pk, position)
    except TimelineEvent.DoesNotExist:
        raise Http404("No event at this position.") from None
    frame = timeline.frame_of(event)
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
            "next": position + 1 if position < timeline.last_position(execution_pk) else None,
        },
    )


def _pretty(value: object) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)
