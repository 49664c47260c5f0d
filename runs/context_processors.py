"""Template context shared by every page of the dashboard."""

from typing import Any

from django.http import HttpRequest

from runs.services.lifecycle import answerable_requests
from runs.services.store import queueing, saved_views


def pending_approvals(request: HttpRequest) -> dict[str, int]:
    """How many deferred requests wait for the user's answer, for the badge on the Approvals link."""
    if not request.user.is_authenticated:
        return {}
    return {"pending_approvals": answerable_requests(request.user).count()}


def queue_state(request: HttpRequest) -> dict[str, bool]:
    """Whether the queue (Redis) is unreachable, for the banner every page shows then (cached, never slow)."""
    if not request.user.is_authenticated:
        return {}
    return {"queue_unreachable": not queueing.queue_reachable()}


def saved_views_nav(request: HttpRequest) -> dict[str, Any]:
    """The user's saved views of the executions list, for the nav (a lazy query: pages without a nav never run it)."""
    if not request.user.is_authenticated:
        return {}
    return {"nav_saved_views": saved_views.views_of(request.user)}
