"""The AG-UI endpoint: `POST /agui/<profile>/` starts or resumes a run (a token needs scope `read+decide`),
`GET /agui/executions/<pk>/events` watches any execution (scope `read`). Both answer server-sent events
(`streams.py`); refusals are JSON (`errors.py`)."""

from __future__ import annotations

import json
from typing import Any

from ag_ui.core import RunAgentInput
from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import connections
from django.http import HttpRequest, HttpResponseBase, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST
from pydantic import ValidationError

from runs.services.store.access import visible_executions
from runs.services.timeline import last_position
from runs.validators import unstorable_json

from . import intake
from .auth import Caller, authenticate, csrf_refusal
from .errors import Refused
from .models import TokenScope
from .streams import sse_events

__all__ = ("execution_events", "run_agent")


def _refusal(refused: Refused) -> JsonResponse:
    response = JsonResponse(refused.body(), status=refused.status)
    if refused.status == 429:
        response["Retry-After"] = str(refused.details[0]["retryAfter"])
    elif refused.status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="agui"'
    elif refused.code == "insufficient_scope":
        needed = TokenScope.READ_DECIDE.value
        response["WWW-Authenticate"] = f'Bearer realm="agui", error="insufficient_scope", scope="{needed}"'
    return response


def _sse(events: Any) -> StreamingHttpResponse:
    return StreamingHttpResponse(
        events, content_type="text/event-stream", headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    )


def _run_input(request: HttpRequest) -> RunAgentInput:
    limit = settings.AGUI_MAX_BODY_BYTES
    too_big = Refused(413, "too_large", f"The request body is larger than {limit} bytes.")
    declared = request.headers.get("Content-Length") or "0"
    if not declared.isdigit():
        raise Refused(400, "invalid_input", "Content-Length must be a whole number of bytes.")
    if int(declared) > limit:
        raise too_big
    try:
        body = request.body
    except RequestDataTooBig as exc:
        raise too_big from exc
    if len(body) > limit:
        raise too_big
    try:
        run_input = RunAgentInput.model_validate_json(body)
    except ValidationError as exc:
        errors = json.loads(exc.json(include_url=False, include_input=False))
        raise Refused(400, "invalid_input", "The body is not a valid AG-UI RunAgentInput.", errors) from exc
    # Ids and texts become rows: NUL (refused by PostgreSQL) or a lone surrogate (by both databases) must stop here.
    if problem := unstorable_json(run_input.model_dump(mode="json")):
        raise Refused(400, "invalid_input", f"The body {problem}.")
    return run_input


def _begin(profile: str, run_input: RunAgentInput, caller: Caller) -> intake.StreamStart:
    try:
        token = caller.token.pk if caller.token is not None else None
        return intake.begin(profile, run_input, caller.user, team=caller.team, token=token)
    finally:
        connections.close_all()


@csrf_exempt
@require_POST
async def run_agent(request: HttpRequest, profile: str) -> HttpResponseBase:
    """Start an execution on the RunAgentInput's thread (or resume it) and stream its AG-UI events."""
    try:
        caller = await authenticate(request)
        if not caller.by_token and (refusal := csrf_refusal(request)) is not None:
            return refusal
        # Starting work and answering interrupts both act: a read-only token stops here, before the body is read.
        caller.require(TokenScope.READ_DECIDE)
        run_input = _run_input(request)
        start = await sync_to_async(_begin)(profile, run_input, caller)
    except Refused as refused:
        return _refusal(refused)
    return _sse(sse_events(start.execution_pk, start.after, caller))


def _cursor(execution_pk: int, header: str | None) -> int:
    try:
        last = last_position(execution_pk)
    finally:
        connections.close_all()
    if header is None:
        return 0
    if not header.isdigit():
        raise Refused(400, "bad_cursor", "Last-Event-ID must be a timeline position (a whole number).")
    after = int(header)
    if after > last:
        raise Refused(400, "cursor_beyond_end", f"Execution {execution_pk} has no position {after} yet.")
    return after


def _visible(execution_pk: int, caller: Caller) -> bool:
    try:
        return caller.within(visible_executions(caller.user)).filter(pk=execution_pk).exists()
    finally:
        connections.close_all()


@require_GET
async def execution_events(request: HttpRequest, pk: int) -> HttpResponseBase:
    """Replay an execution's AG-UI events after `Last-Event-ID` (or from the start), then follow until it settles."""
    try:
        caller = await authenticate(request)
        caller.require(TokenScope.READ)
        # Another team's execution is answered like one that does not exist.
        if not await sync_to_async(_visible)(pk, caller):
            raise Refused(404, "not_found", f"There is no execution {pk}.")
        after = await sync_to_async(_cursor)(pk, request.headers.get("Last-Event-ID"))
    except Refused as refused:
        return _refusal(refused)
    return _sse(sse_events(pk, after, caller))
