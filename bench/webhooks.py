"""Benchmark: webhook fan-out of a burst of 1,000 events, delivered by a real RQ worker to a local receiver.

Seeded once (not timed): `EVENTS` executions waiting for one approval each (the test factories' suspended
executions) and one active JSON webhook of their team for `approval.requested`, aimed at a local HTTP server in
this process (tests/support/webhook_receiver.py) that records every request. A real RQ worker (`manage.py
rqworker`, the Host's worker class) runs the delivery jobs.

Subject, `BURSTS` times: the burst. For each execution `approval.requested` is announced in a transaction of its
own, as the runner does when a run suspends (`host_events.announce`: after the commit the alerts listener writes
the delivery and requests a drain job), one right after the other, until the receiver holds every delivery. The
benchmark fails unless every event arrived exactly once (one request per delivery id and per execution), signed
with the webhook's secret, and the delivery log says delivered at the first attempt. Figures: deliveries per second
from the first announcement to the last receipt, and each delivery's time from its enqueueing (its announcement's
commit returned, the delivery written and its drain requested) to its receipt, p50 and p99. Baseline: the same
bodies POSTed one after another from this process by one httpx client, unsigned, unqueued and unlogged: what
the HTTP requests alone cost. Beside it, the cost of one POST on a connection of its own (`httpx.post` with one TLS
context per process, as `alerts.delivery.post` makes every attempt) is measured once: how much of the gap that alone
accounts for.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from typing import Any

import httpx

from tests.support.services import RQWorker, wait_until
from tests.support.webhook_receiver import WebhookReceiver

from .context import BenchContext
from .measure import Comparison, Report, Stats, Target, percentile, stopwatch

__all__ = ("run",)

EVENTS = 1_000
QUICK_EVENTS = 10
# A burst of 1,000 takes tens of seconds (see the one-shot POST cost in the JSON): three of them, not five.
BURSTS = 3
# The first burst also waits for the worker to start: a small one, not timed.
WARM_UP = 5
ONE_SHOT_PROBE = 20
SECRET = "bench-webhook-secret"
DELIVERED_WITHIN_SECONDS = 300
TARGET = Target(
    "relative_throughput", ">=", 0.5, "the Host delivers at least half as many events/s as a plain POST loop"
)


def _seed(count: int) -> tuple[list[tuple[int, int]], Any]:
    """`count` executions waiting for one approval each, as (execution pk, request set's checkpoint pk), and
    their team."""
    from pydantic_ai import ToolCallPart

    from tests.support import factories

    waiting = []
    for n in range(count):
        call = ToolCallPart("send_payment", {"amount": 5 + n, "to": "acme"}, tool_call_id="call-pay")
        suspended = factories.suspended_execution(approvals=(call,), title=f"webhook {n}")
        waiting.append((suspended.execution.pk, suspended.checkpoint_id))
    team = suspended.execution.thread.team
    return waiting, team


def _burst(
    receiver: WebhookReceiver, webhook: Any, waiting: list[tuple[int, int]]
) -> tuple[float, list[float], list[str]]:
    """One burst; returns its seconds (first announcement to last receipt), each delivery's enqueue-to-receipt
    seconds, and the bodies delivered. Raises unless every event arrived once, signed, and was logged delivered."""
    from django.db import transaction

    from alerts.models import DeliveryStatus, WebhookDelivery
    from runs.services.store.host_events import HostEvent, announce

    WebhookDelivery.objects.filter(webhook=webhook).delete()
    since = len(receiver.received)
    enqueued: dict[int, float] = {}
    began = time.perf_counter()
    for execution_pk, checkpoint_pk in waiting:
        with transaction.atomic():
            announce(HostEvent.APPROVAL_REQUESTED, execution=execution_pk, checkpoint=checkpoint_pk)
        enqueued[execution_pk] = time.perf_counter()
    wait_until(
        lambda: len(receiver.to_path("/ok", after=since)) >= len(waiting),
        timeout=DELIVERED_WITHIN_SECONDS,
        what=f"{len(waiting)} webhook deliveries",
    )
    deliveries = WebhookDelivery.objects.filter(webhook=webhook)
    wait_until(
        lambda: deliveries.filter(status=DeliveryStatus.DELIVERED).count() == len(waiting),
        timeout=DELIVERED_WITHIN_SECONDS,
        what="the delivery log to say delivered",
    )
    received = receiver.to_path("/ok", after=since)
    by_delivery = Counter(request.headers.get("x-harness-delivery") for request in received)
    by_execution = Counter(json.loads(request.body)["execution"]["id"] for request in received)
    logged = {str(delivery_id) for delivery_id in deliveries.values_list("delivery_id", flat=True)}
    if set(by_delivery) != logged or set(by_delivery.values()) != {1}:
        raise RuntimeError(f"webhooks: {len(received)} requests for {len(logged)} deliveries, not one each")
    if set(by_execution) != set(enqueued) or set(by_execution.values()) != {1}:
        raise RuntimeError("webhooks: an event arrived more than once, or not at all")
    if not all(request.signed_by(SECRET) for request in received):
        raise RuntimeError("webhooks: a delivery's signature does not verify")
    if set(deliveries.values_list("attempts", "response_code")) != {(1, 204)}:
        raise RuntimeError("webhooks: a delivery took more than one attempt")
    latencies = [request.at - enqueued[json.loads(request.body)["execution"]["id"]] for request in received]
    last = max(request.at for request in received)
    return last - began, latencies, [request.body.decode() for request in received]


def _plain_posts(receiver: WebhookReceiver, bodies: list[str]) -> float:
    """The same bodies POSTed one after another by one HTTP client, unsigned: the HTTP requests alone."""
    since = len(receiver.received)
    with stopwatch() as elapsed, httpx.Client(timeout=10, follow_redirects=False) as client:
        for body in bodies:
            client.post(
                f"{receiver.url}/plain", content=body.encode(), headers={"Content-Type": "application/json"}
            ).raise_for_status()
    if len(receiver.to_path("/plain", after=since)) != len(bodies):
        raise RuntimeError("webhooks: the plain POST loop lost a request")
    return elapsed()


def _one_shot_post_ms(receiver: WebhookReceiver, bodies: list[str]) -> float:
    """Milliseconds per POST when each opens a connection of its own (`httpx.post` with one TLS context, as
    `alerts.delivery.post` does)."""
    tls = httpx.create_ssl_context()
    with stopwatch() as elapsed:
        for body in bodies:
            httpx.post(f"{receiver.url}/plain", content=body.encode(), timeout=10, verify=tls).raise_for_status()
    return elapsed() / len(bodies) * 1000


def run(context: BenchContext) -> Report:
    from alerts.models import Webhook

    count = QUICK_EVENTS if context.quick else EVENTS
    report = Report("webhooks", context.database, context.quick, BURSTS)
    with stopwatch() as seeding:
        waiting, team = _seed(count)
    subject: list[float] = []
    baseline: list[float] = []
    p50s: list[float] = []
    p99s: list[float] = []
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "DJANGO_SETTINGS_MODULE": "harness_site.settings"}
    worker = RQWorker(env).start()
    try:
        with WebhookReceiver() as receiver:
            webhook = Webhook.objects.create(
                name="bench", team=team, url=f"{receiver.url}/ok", events=["approval.requested"], secret=SECRET
            )
            bodies = _burst(receiver, webhook, waiting[:WARM_UP])[2]
            _plain_posts(receiver, bodies)
            one_shot_ms = _one_shot_post_ms(receiver, (bodies * ONE_SHOT_PROBE)[:ONE_SHOT_PROBE])
            for _ in range(BURSTS):
                seconds, latencies, bodies = _burst(receiver, webhook, waiting)
                subject.append(seconds)
                p50s.append(percentile(latencies, 0.5) * 1000)
                p99s.append(percentile(latencies, 0.99) * 1000)
                baseline.append(_plain_posts(receiver, bodies))
            webhook.delete()
    finally:
        worker.stop()
    size = f"{count:,} events"
    extra = {"seed_s": seeding(), "workers": 1, "checked_exactly_once": True, "one_shot_post_ms": one_shot_ms}
    report.add(
        Comparison(
            name="burst delivered",
            size=size,
            items=count,
            subject=Stats.of(subject),
            baseline=Stats.of(baseline),
            baseline_name="the same bodies POSTed in a loop by one httpx client, unsigned",
            target=TARGET,
            extra=extra,
        )
    )
    for name, values in (("enqueue-to-receipt p50", p50s), ("enqueue-to-receipt p99", p99s)):
        report.add(
            Comparison(
                name=name,
                size=size,
                items=0,
                subject=Stats.of(values),
                baseline=None,
                baseline_name="",
                target=None,
                unit="ms",
                extra=extra,
            )
        )
    report.notes.append(
        f"{count:,} `approval.requested` events announced one after another (each after its own commit, as the runner "
        "does), fanned out to one signed JSON webhook and sent by one real RQ worker's drain jobs to a local HTTP "
        "receiver in the benchmark's process; every repetition checks each event arrived exactly once, signed, "
        "logged delivered at the first attempt. Baseline: the same bodies POSTed in a plain loop by one httpx client; "
        f"a POST on a connection of its own (as the Host sends) took {one_shot_ms:.1f} ms. "
        "Enqueue-to-receipt runs from an announcement's commit (delivery written, drain requested) to its receipt, "
        "so in a burst it includes the wait behind the deliveries before it."
    )
    return report
