"""Sending deliveries: attempts by RQ jobs, the outcome written to each row, retries timed by the sweeper.

New deliveries are sent by a drain job, requested after the commit that created them: one job sends every new
delivery there is (for up to DRAIN_SECONDS, then it asks for another), so a burst of events costs a few jobs, not
one forked work-horse each, and runs queued behind it wait little. A Redis key marks a drain as requested, so only
one waits in the queue at a time; the job clears it before it looks, so nothing committed meanwhile is missed.

A row holds its schedule, not Redis: a failed
attempt that may succeed later (no answer, a connection error, 5xx, 408, 429) sets `next_attempt_at` with a
doubling backoff, and the sweeper's pass enqueues every delivery that is due (`send_due`). The same pass enqueues
a delivery whose job was lost (Redis down at the commit, a worker killed mid-attempt), so nothing waits forever
and nothing needs RQ's scheduler. A job claims its delivery with a conditional UPDATE, so a delivery enqueued
twice is still sent once per attempt.

Redirects are not followed: a webhook is a fixed address, and an answer that moves it (or loops) is reported as
such rather than chased.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import ssl
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

import httpx
from django.conf import settings
from django.db import transaction
from django.db.models import F, QuerySet
from django.utils import timezone
from redis.exceptions import RedisError

from runs.services.store import queueing

from .models import DeliveryStatus, Webhook, WebhookDelivery
from .signing import signed_headers

__all__ = ("attempt", "backoff", "drain", "drain_after_commit", "send_again", "send_due")

log = logging.getLogger(__name__)

JOB = "alerts.jobs.deliver_webhook"
DRAIN_JOB = "alerts.jobs.drain_webhooks"
DRAIN_KEY = "harness:webhooks:drain-requested"
# A drain requested but lost with Redis is forgotten after this; the sweeper sends its deliveries meanwhile.
DRAIN_KEY_SECONDS = 120
DRAIN_SECONDS = 30.0
DRAIN_BATCH = 100
MAX_BACKOFF = timedelta(hours=1)
# A delivery whose job has not claimed it by then is taken as lost and enqueued again by the sweeper.
REQUEUE_AFTER = timedelta(seconds=60)
# Due deliveries one sweeper pass enqueues at most; the rest go in the next passes.
DUE_PER_PASS = 200
ERROR_CHARS = 500
RETRIED_CODES = frozenset({408, 429})


@dataclass(frozen=True)
class DeliveryOutcome:
    delivered: bool
    retry: bool
    code: int | None = None
    error: str = ""


def backoff(attempts: int) -> timedelta:
    """The wait after the `attempts`-th failed attempt: the base, doubled for each further one, at most an hour."""
    seconds = settings.HARNESS_WEBHOOK_BACKOFF_SECONDS * 2 ** min(attempts - 1, 20)
    return min(timedelta(seconds=seconds), MAX_BACKOFF)


def _enqueue(delivery_pk: int) -> bool:
    try:
        queueing.host_queue(commit_mode="auto").enqueue(JOB, delivery_pk)
    except RedisError as exc:
        log.warning("webhook delivery %s waits for the sweeper: the queue cannot be reached (%s)", delivery_pk, exc)
        return False
    return True


def _request_drain() -> None:
    queue = queueing.host_queue(commit_mode="auto")
    try:
        if queue.connection.set(DRAIN_KEY, "1", nx=True, ex=DRAIN_KEY_SECONDS):
            queue.enqueue(DRAIN_JOB)
    except RedisError as exc:
        log.warning("new webhook deliveries wait for the sweeper: the queue cannot be reached (%s)", exc)


def drain_after_commit() -> None:
    transaction.on_commit(_request_drain)


def drain(seconds: float = DRAIN_SECONDS) -> int:
    """Send every delivery not yet attempted (the drain job); returns how many were attempted."""
    with contextlib.suppress(RedisError):
        # Cleared first: a delivery committed from now on requests a drain of its own.
        queueing.host_queue().connection.delete(DRAIN_KEY)
    deadline = time.monotonic() + seconds
    attempted = 0
    while True:
        fresh = WebhookDelivery.objects.filter(status=DeliveryStatus.PENDING, attempts=0).order_by("pk")
        batch = list(fresh.values_list("pk", flat=True)[:DRAIN_BATCH])
        if not batch:
            return attempted
        for delivery_pk in batch:
            if time.monotonic() > deadline:
                _request_drain()
                return attempted
            attempt(delivery_pk)
            attempted += 1


@functools.cache
def _tls() -> ssl.SSLContext:
    """One TLS context per process: building one (it loads the CA bundle) cost about 75 ms of a 78 ms attempt under
    load, and httpx builds a new one for every `httpx.post`. Connections and cookies stay per attempt."""
    return httpx.create_ssl_context()


def post(webhook: Webhook, delivery: WebhookDelivery) -> DeliveryOutcome:
    body = delivery.body.encode()
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "harness-host-webhooks",
        "X-Harness-Event": delivery.event,
        "X-Harness-Delivery": str(delivery.delivery_id),
        **signed_headers(webhook.secret, int(time.time()), body),
    }
    timeout = settings.HARNESS_WEBHOOK_TIMEOUT_SECONDS
    try:
        response = httpx.post(
            webhook.url, content=body, headers=headers, timeout=timeout, follow_redirects=False, verify=_tls()
        )
    except httpx.TimeoutException:
        return DeliveryOutcome(delivered=False, retry=True, error=f"No answer within {timeout:g} s.")
    except httpx.HTTPError as exc:
        return DeliveryOutcome(delivered=False, retry=True, error=f"{type(exc).__name__}: {exc}"[:ERROR_CHARS])
    code = response.status_code
    if response.is_success:
        return DeliveryOutcome(delivered=True, retry=False, code=code)
    if response.is_redirect:
        target = response.headers.get("location", "")[:ERROR_CHARS]
        return DeliveryOutcome(
            delivered=False,
            retry=False,
            code=code,
            error=(
                f"Answered {code}, a redirect to {target!r}; webhooks do not follow redirects: enter the final address."
            ),
        )
    retry = response.is_server_error or code in RETRIED_CODES
    return DeliveryOutcome(delivered=False, retry=retry, code=code, error=f"Answered {code} {response.reason_phrase}.")


def attempt(delivery_pk: int) -> str:
    """One attempt at a pending delivery (the RQ job); returns its status after."""
    claimed = WebhookDelivery.objects.filter(pk=delivery_pk, status=DeliveryStatus.PENDING).update(
        status=DeliveryStatus.SENDING, attempts=F("attempts") + 1, last_attempt_at=timezone.now()
    )
    if not claimed:
        return "not pending"
    delivery = WebhookDelivery.objects.select_related("webhook").get(pk=delivery_pk)
    webhook = delivery.webhook
    if webhook.active:
        outcome = post(webhook, delivery)
    else:
        outcome = DeliveryOutcome(delivered=False, retry=False, error="The webhook is switched off.")
    now = timezone.now()
    fields: dict[str, object] = {"response_code": outcome.code, "last_error": outcome.error}
    if outcome.delivered:
        fields |= {"status": DeliveryStatus.DELIVERED, "delivered_at": now, "next_attempt_at": None}
    elif outcome.retry and delivery.attempts < settings.HARNESS_WEBHOOK_ATTEMPTS:
        fields |= {"status": DeliveryStatus.PENDING, "next_attempt_at": now + backoff(delivery.attempts)}
    else:
        fields |= {"status": DeliveryStatus.FAILED, "next_attempt_at": None}
    WebhookDelivery.objects.filter(pk=delivery_pk, status=DeliveryStatus.SENDING).update(**fields)
    log.info("webhook delivery %s attempt %s: %s", delivery_pk, delivery.attempts, fields["status"])
    return str(fields["status"])


def send_due(now: datetime) -> int:
    """The sweeper's part: deliveries whose retry is due, or whose job was lost, go to the queue; returns how many."""
    _release_stuck(now)
    due = WebhookDelivery.objects.filter(status=DeliveryStatus.PENDING, next_attempt_at__lte=now)
    sent = 0
    for delivery_pk in due.order_by("next_attempt_at").values_list("pk", flat=True)[:DUE_PER_PASS]:
        # Moved ahead first, so the next pass does not enqueue it again while this job waits in the queue.
        moved = WebhookDelivery.objects.filter(
            pk=delivery_pk, status=DeliveryStatus.PENDING, next_attempt_at__lte=now
        ).update(next_attempt_at=now + REQUEUE_AFTER)
        if moved and _enqueue(delivery_pk):
            sent += 1
    return sent


def _release_stuck(now: datetime) -> None:
    """An attempt that never finished (its worker was killed) counts as failed without an answer."""
    stuck = WebhookDelivery.objects.filter(
        status=DeliveryStatus.SENDING,
        last_attempt_at__lt=now - timedelta(seconds=settings.HARNESS_WEBHOOK_TIMEOUT_SECONDS) - REQUEUE_AFTER,
    )
    error = "The attempt did not finish (its worker stopped)."
    stuck.filter(attempts__gte=settings.HARNESS_WEBHOOK_ATTEMPTS).update(
        status=DeliveryStatus.FAILED, last_error=error, next_attempt_at=None
    )
    stuck.update(status=DeliveryStatus.PENDING, last_error=error, next_attempt_at=now)


def send_again(deliveries: QuerySet[WebhookDelivery]) -> int:
    """The admin's "send again": a fresh round of attempts for each delivery not being sent right now."""
    now = timezone.now()
    with transaction.atomic():
        chosen = list(deliveries.exclude(status=DeliveryStatus.SENDING).values_list("pk", flat=True))
        WebhookDelivery.objects.filter(pk__in=chosen).update(
            status=DeliveryStatus.PENDING, attempts=0, next_attempt_at=now + REQUEUE_AFTER
        )
        drain_after_commit()
    return len(chosen)
