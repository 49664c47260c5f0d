"""What a webhook receives: ids, links and masked text, never a tool's arguments or a model's output.

`event_payload` builds the JSON document of an event once (the same for every webhook); `body_for` renders it in
a webhook's format: the document itself, or Slack's incoming-webhook message (`text`, with links in Slack's
`<url|label>` form and the escaping Slack asks for).
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.db.models import QuerySet
from django.urls import reverse
from django.utils import timezone

from runs.models import Decision, DecisionSubmission, DeferredKind, DeferredRequest, Execution, Run
from runs.services.store.host_events import HostEvent
from runs.services.timeline import redactor_for

from .models import WebhookFormat

__all__ = ("body_for", "event_payload", "subject_of")

Payload = dict[str, Any]


def _link(name: str, **kwargs: int) -> str:
    return settings.HARNESS_PUBLIC_URL + reverse(name, kwargs=kwargs)


def subject_of(event: HostEvent, execution: int, keys: dict[str, int]) -> str:
    """What the event is about: it is delivered once per subject and webhook."""
    if "submission" in keys:
        return f"submission:{keys['submission']}"
    if "checkpoint" in keys:
        return f"checkpoint:{keys['checkpoint']}"
    if "run" in keys:
        return f"run:{keys['run']}"
    return f"execution:{execution}"


def event_payload(event: HostEvent, execution: Execution, keys: dict[str, int]) -> Payload:
    redactor = redactor_for(execution.policy_version)
    thread = execution.thread
    payload: Payload = {
        "event": event.value,
        "occurred_at": timezone.now().isoformat(),
        "team": thread.team.name,
        "thread": {
            "id": thread.pk,
            "title": redactor.text(str(thread)),
            "profile": thread.profile.name,
            "url": _link("runs:thread", pk=thread.pk),
        },
        "execution": {
            "id": execution.pk,
            "number": execution.number,
            "status": execution.status,
            "started_by": execution.created_by.get_username() if execution.created_by else None,
            "url": _link("runs:execution", pk=execution.pk),
        },
    }
    if event in (HostEvent.APPROVAL_REQUESTED, HostEvent.APPROVAL_EXPIRING):
        requests = DeferredRequest.objects.filter(execution=execution, checkpoint_id=keys["checkpoint"])
        payload["requests"] = _requests(requests.exclude(kind=DeferredKind.CHILD).order_by("pk"))
        payload["answer_url"] = _link("runs:approval_decide", execution_pk=execution.pk)
    elif event == HostEvent.APPROVAL_DECIDED:
        submission = DecisionSubmission.objects.get(pk=keys["submission"])
        decisions = Decision.objects.filter(submission=submission).select_related("request", "decided_by")
        payload["decisions"] = [
            {
                "request": decision.request_id,
                "tool": decision.request.tool_name,
                "verdict": decision.verdict,
                "decided_by": decision.decided_by.get_username() if decision.decided_by else None,
                "message": redactor.text(decision.message),
            }
            for decision in decisions.order_by("pk")
        ]
    elif event == HostEvent.EXECUTION_FAILED:
        payload["failure"] = {"code": execution.failure_code, "message": redactor.text(execution.failure_message)}
    elif event == HostEvent.EXECUTION_RECOVERED:
        run = Run.objects.get(pk=keys["run"])
        url = _link("runs:run", pk=run.pk)
        payload["run"] = {"id": run.pk, "number": run.number, "attempt": run.attempt, "url": url}
    return payload


def _requests(requests: QuerySet[DeferredRequest]) -> list[Payload]:
    return [
        {
            "id": request.pk,
            "tool": request.tool_name,
            "kind": request.kind,
            "expires_at": request.expires_at.isoformat() if request.expires_at else None,
        }
        for request in requests
    ]


def body_for(payload: Payload, webhook_format: str) -> str:
    if webhook_format == WebhookFormat.SLACK:
        return json.dumps({"text": slack_text(payload)})
    return json.dumps(payload)


def _slack_escape(text: str) -> str:
    # Slack reads &, < and > as markup: a title must never become a link or a mention.
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _slack_decision(decision: Payload) -> str:
    by = f" by {_slack_escape(decision['decided_by'])}" if decision["decided_by"] else ""
    return f"{_slack_escape(decision['tool'])} {decision['verdict']}{by}"


def slack_text(payload: Payload) -> str:
    execution, thread = payload["execution"], payload["thread"]
    where = (
        f"<{execution['url']}|execution {execution['number']}> of "
        f"“{_slack_escape(thread['title'])}” ({_slack_escape(payload['team'])})"
    )
    event = payload["event"]
    if event in (HostEvent.APPROVAL_REQUESTED, HostEvent.APPROVAL_EXPIRING):
        tools = ", ".join(_slack_escape(request["tool"]) for request in payload["requests"])
        verb = "waits for an answer" if event == HostEvent.APPROVAL_REQUESTED else "expires soon without an answer"
        return f"{where} {verb}: {tools}. <{payload['answer_url']}|Answer>"
    if event == HostEvent.APPROVAL_DECIDED:
        decided = ", ".join(_slack_decision(decision) for decision in payload["decisions"])
        return f"{where}: {decided}."
    if event == HostEvent.EXECUTION_FAILED:
        failure = payload["failure"]
        return f"{where} failed ({_slack_escape(failure['code'])}): {_slack_escape(failure['message'])}"
    if event == HostEvent.EXECUTION_RECOVERED:
        return f"{where}: a worker stopped; <{payload['run']['url']}|attempt {payload['run']['attempt']}> continues."
    return f"{where} completed."
