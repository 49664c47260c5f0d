"""Webhooks (where a team's events go) and their deliveries (one per webhook and event, with its attempts)."""

from __future__ import annotations

import secrets
import uuid

from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.db import models

from runs.models import Team
from runs.services.store.host_events import HostEvent

EVENT_CHOICES = [(event.value, event.value) for event in HostEvent]


def new_secret() -> str:
    return secrets.token_urlsafe(32)


def _known_events(value: object) -> None:
    known = {event.value for event in HostEvent}
    if not isinstance(value, list) or not value or not all(isinstance(name, str) and name in known for name in value):
        raise ValidationError("Choose one or more of: %(known)s.", params={"known": ", ".join(sorted(known))})


class WebhookFormat(models.TextChoices):
    JSON = "json", "JSON (signed)"
    SLACK = "slack", "Slack incoming webhook"


class Webhook(models.Model):
    """An address that receives the chosen events of one team's threads, signed with the webhook's secret."""

    name = models.CharField(max_length=100)
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="webhooks")
    url = models.URLField(
        "URL",
        max_length=2000,
        validators=[URLValidator(schemes=["http", "https"])],
        help_text="Where events are POSTed.",
    )
    events = models.JSONField(default=list, validators=[_known_events])
    format = models.CharField(max_length=8, choices=WebhookFormat.choices, default=WebhookFormat.JSON)
    secret = models.CharField(
        max_length=200,
        default=new_secret,
        help_text="Keys the X-Harness-Signature header (HMAC-SHA256 of timestamp '.' body); give it to the receiver.",
    )
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["team__name", "name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.team.name})"


class DeliveryStatus(models.TextChoices):
    PENDING = "pending"  # waiting for its (next) attempt
    SENDING = "sending"  # an attempt is under way
    DELIVERED = "delivered"
    FAILED = "failed"  # no attempt left, or an answer that retrying cannot change


class WebhookDelivery(models.Model):
    """One event for one webhook: the body as first built (sent unchanged on every attempt) and how it went."""

    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries")
    event = models.CharField(max_length=40, choices=EVENT_CHOICES)
    # What the event is about ("execution:12", "submission:4"): an event is delivered once per subject.
    subject = models.CharField(max_length=100)
    delivery_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    body = models.TextField()
    status = models.CharField(max_length=12, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    response_code = models.PositiveSmallIntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True, db_index=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        verbose_name_plural = "webhook deliveries"
        constraints = [
            models.UniqueConstraint(fields=["webhook", "event", "subject"], name="alerts_delivery_once_per_subject")
        ]

    def __str__(self) -> str:
        return f"{self.event} {self.subject} → {self.webhook.name}"
