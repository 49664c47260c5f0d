"""Pages of the dashboard. Views stay thin: queries and actions live on models and in runs.services."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


@login_required
def threads(request: HttpRequest) -> HttpResponse:
    return render(request, "runs/threads.html", {"threads": []})
