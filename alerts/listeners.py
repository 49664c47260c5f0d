"""Turning the Host's events into deliveries: one per active webhook of the thread's team that chose the event.

Connected from `AlertsConfig.ready` to the runs app's signals (`runs.services.store.host_events`), which fire after
the run's or the decision's transaction committed: building the payload and writing the deliveries happen in a
short transaction of their own, and their jobs are enqueued after it commits.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from runs.models import DeferredKind, DeferredRequest, DeferredStatus, Execution
from runs.services.store.host_events import HostEvent, host_event, sweep_passed

from . import delivery
from .models import Webhook, WebhookDelivery
from .payloads import body_for, event_payload, subject_of

__all__ = ("announce_expiring", "connect", "fan_out")


def connect() -> None:
    host_event.connect(_on_host_event, dispatch_uid="alerts-webhooks")
    sweep_passed.connect(_on_sweep, dispatch_uid="alerts-webhooks")


def _on_host_event(sender: Any, *, signal: Any, event: HostEvent, execution: int, **keys: int) -> None:
    fan_out(HostEvent(event), execution, keys)


def _on_sweep(sender: Any, *, now: datetime, **kwargs: Any) -> None:
    announce_expiring(now)
    delivery.send_due(now)


def fan_out(event: HostEvent, execution_pk: int, keys: dict[str, int]) -> list[int]:
    """Write (once per subject) and enqueue the event's deliveries; returns the new deliveries' pks."""
    # Most teams have no webhook for most events: one query answers that, before the payload's joins.
    webhooks = [
        webhook
        for webhook in Webhook.objects.filter(team__threads__executions=execution_pk, active=True)
        if event in webhook.events
    ]
    if not webhooks:
        return []
    execution = (
        Execution.objects.select_related("thread__team", "thread__profile", "policy_version", "created_by")
        .filter(pk=execution_pk)
        .first()
    )
    if execution is None:
        return []
    subject = subject_of(event, execution_pk, keys)
    done = set(
        WebhookDelivery.objects.filter(webhook__in=webhooks, event=event, subject=subject).values_list(
            "webhook_id", flat=True
        )
    )
    webhooks = [webhook for webhook in webhooks if webhook.pk not in done]
    if not webhooks:
        return []
    payload = event_payload(event, execution, keys)
    created = []
    for webhook in webhooks:
        try:
            with transaction.atomic():
                row = WebhookDelivery.objects.create(
                    webhook=webhook,
                    event=event,
                    subject=subject,
                    body=body_for(payload, webhook.format),
                    next_attempt_at=timezone.now() + delivery.REQUEUE_AFTER,
                )
        except IntegrityError:
            continue  # another process wrote this delivery first
        created.append(row.pk)
    if created:
        delivery.drain_after_commit()
    return created


def announce_expiring(now: datetime) -> int:
    """`approval.expiring` for every open request set that expires within HARNESS_WEBHOOK_EXPIRING_MINUTES."""
    if not any(HostEvent.APPROVAL_EXPIRING in webhook.events for webhook in Webhook.objects.filter(active=True)):
        return 0
    soon = now + timedelta(minutes=settings.HARNESS_WEBHOOK_EXPIRING_MINUTES)
    sets = (
        DeferredRequest.objects.filter(status=DeferredStatus.PENDING, expires_at__gt=now, expires_at__lte=soon)
        .exclude(kind=DeferredKind.CHILD)
        .values_list("execution_id", "checkpoint_id")
        .distinct()
    )
    return sum(
        len(fan_out(HostEvent.APPROVAL_EXPIRING, execution_pk, {"checkpoint": checkpoint_pk}))
        for execution_pk, checkpoint_pk in sets
    )
