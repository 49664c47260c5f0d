"""Outgoing webhooks in this process: deliveries made once per subscribed webhook of the thread's team, payloads
with masked text only, and attempts against a real local HTTP server that answers, fails, hangs or loops."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from alerts import delivery, listeners, payloads
from alerts.models import DeliveryStatus, Webhook, WebhookDelivery, WebhookFormat
from runs.models import DEFAULT_TEAM, Team
from runs.services.lifecycle import executions
from runs.services.store.host_events import HostEvent
from runs.services.store.queued_jobs import JOB_FUNCTIONS
from tests.support import factories
from tests.support.webhook_receiver import WebhookReceiver

pytestmark = pytest.mark.django_db

SECRET = "s3cret-for-tests"


@pytest.fixture
def receiver():
    with WebhookReceiver() as server:
        yield server


def webhook(url: str, *events: HostEvent, team: str = DEFAULT_TEAM, **fields) -> Webhook:
    return Webhook.objects.create(
        name=f"hook-{Webhook.objects.count()}",
        team=Team.objects.get_or_create(name=team)[0],
        url=url,
        events=[event.value for event in events] or [event.value for event in HostEvent],
        secret=SECRET,
        **fields,
    )


def failed_execution(message: str = "deploy refused: api_key=sk-live-123 was rejected"):
    factories.configure_policy(redact_patterns=["api_key"])
    execution = factories.make_execution(factories.make_thread("Release <b>2.0</b> & more"), status="failed")
    execution.policy_version = executions.current_policy_version()
    execution.failure_code = "model_error"
    execution.failure_message = message
    execution.save()
    return execution


def test_an_event_is_delivered_once_to_each_webhook_of_the_team_that_chose_it():
    execution = failed_execution()
    chosen = webhook("http://127.0.0.1:9/a", HostEvent.EXECUTION_FAILED)
    webhook("http://127.0.0.1:9/b", HostEvent.EXECUTION_COMPLETED)
    webhook("http://127.0.0.1:9/c", HostEvent.EXECUTION_FAILED, active=False)
    webhook("http://127.0.0.1:9/d", HostEvent.EXECUTION_FAILED, team="research")

    created = listeners.fan_out(HostEvent.EXECUTION_FAILED, execution.pk, {})
    again = listeners.fan_out(HostEvent.EXECUTION_FAILED, execution.pk, {})

    [row] = WebhookDelivery.objects.all()
    assert created == [row.pk] and again == []
    assert (row.webhook, row.event, row.status) == (chosen, "execution.failed", "pending")
    assert row.subject == f"execution:{execution.pk}"


def test_an_event_no_webhook_of_the_team_chose_costs_one_query(django_assert_num_queries):
    """Every execution's end is announced, from the worker's one database thread: most teams subscribe to few
    events, and those are answered before the payload's joins are read."""
    execution = failed_execution()
    webhook("http://127.0.0.1:9/b", HostEvent.EXECUTION_COMPLETED)
    webhook("http://127.0.0.1:9/d", HostEvent.EXECUTION_FAILED, team="research")

    with django_assert_num_queries(1):
        assert listeners.fan_out(HostEvent.EXECUTION_FAILED, execution.pk, {}) == []


def test_the_payload_has_ids_links_and_masked_text_only():
    execution = failed_execution()
    webhook("http://127.0.0.1:9/", HostEvent.EXECUTION_FAILED)

    listeners.fan_out(HostEvent.EXECUTION_FAILED, execution.pk, {})

    body = json.loads(WebhookDelivery.objects.get().body)
    assert "sk-live-123" not in json.dumps(body)
    assert body["failure"] == {"code": "model_error", "message": "deploy refused: api_key=[redacted] was rejected"}
    assert body["execution"]["id"] == execution.pk
    assert body["execution"]["url"].endswith(reverse("runs:execution", kwargs={"pk": execution.pk}))
    assert body["thread"]["url"].startswith("http://")
    assert "input" not in body["execution"]


def test_the_slack_format_is_an_incoming_webhook_message_with_escaped_text():
    execution = failed_execution()
    webhook("http://127.0.0.1:9/", HostEvent.EXECUTION_FAILED, format=WebhookFormat.SLACK)

    listeners.fan_out(HostEvent.EXECUTION_FAILED, execution.pk, {})

    message = json.loads(WebhookDelivery.objects.get().body)
    assert list(message) == ["text"]
    assert "Release &lt;b&gt;2.0&lt;/b&gt; &amp; more" in message["text"]
    assert f"|execution {execution.number}>" in message["text"]
    assert "sk-live-123" not in message["text"] and "failed (model_error)" in message["text"]


def test_approval_events_list_the_requests_and_the_decisions():
    suspended = factories.suspended_execution(expires_in=timedelta(minutes=5))
    webhook("http://127.0.0.1:9/")

    listeners.fan_out(HostEvent.APPROVAL_REQUESTED, suspended.execution.pk, {"checkpoint": suspended.checkpoint_id})

    body = json.loads(WebhookDelivery.objects.get(event="approval.requested").body)
    assert [request["tool"] for request in body["requests"]] == ["send_payment", "delete_file"]
    assert "acme" not in json.dumps(body), "a tool's arguments never leave the Host"
    assert body["answer_url"].endswith(reverse("runs:approval_decide", kwargs={"execution_pk": suspended.execution.pk}))


def test_an_approval_about_to_expire_is_announced_once(settings):
    settings.HARNESS_WEBHOOK_EXPIRING_MINUTES = 10
    soon = factories.suspended_execution(expires_in=timedelta(minutes=5))
    factories.suspended_execution(expires_in=timedelta(hours=2), title="later")
    webhook("http://127.0.0.1:9/", HostEvent.APPROVAL_EXPIRING)

    assert listeners.announce_expiring(timezone.now()) == 1
    assert listeners.announce_expiring(timezone.now()) == 0
    [row] = WebhookDelivery.objects.all()
    assert row.subject == f"checkpoint:{soon.checkpoint_id}"


def deliver(receiver: WebhookReceiver, path: str, **fields) -> WebhookDelivery:
    execution = failed_execution()
    webhook(f"{receiver.url}{path}", HostEvent.EXECUTION_FAILED, **fields)
    [pk] = listeners.fan_out(HostEvent.EXECUTION_FAILED, execution.pk, {})
    delivery.attempt(pk)
    return WebhookDelivery.objects.get(pk=pk)


def test_a_delivery_is_signed_over_a_timestamp_and_the_body(receiver):
    row = deliver(receiver, "/ok")

    [received] = receiver.received
    assert (row.status, row.response_code, row.attempts, row.last_error) == ("delivered", 204, 1, "")
    assert received.body == row.body.encode()
    assert received.signed_by(SECRET)
    assert not received.signed_by("another secret")
    assert not received.signed_by(SECRET, now=int(received.headers["x-harness-timestamp"]) + 3600), "a replay is late"
    assert received.headers["x-harness-delivery"] == str(row.delivery_id)


def test_a_500_is_retried_with_a_doubling_backoff_until_the_attempts_run_out(receiver, settings):
    settings.HARNESS_WEBHOOK_ATTEMPTS = 3
    settings.HARNESS_WEBHOOK_BACKOFF_SECONDS = 30
    row = deliver(receiver, "/fail")
    assert (row.status, row.response_code, row.last_error) == ("pending", 500, "Answered 500 Internal Server Error.")
    assert row.next_attempt_at - row.last_attempt_at == pytest.approx(timedelta(seconds=30), abs=timedelta(seconds=1))

    delivery.attempt(row.pk)
    row.refresh_from_db()
    assert row.status == "pending"
    assert row.next_attempt_at - row.last_attempt_at == pytest.approx(timedelta(seconds=60), abs=timedelta(seconds=1))

    delivery.attempt(row.pk)
    row.refresh_from_db()
    assert (row.status, row.attempts, row.next_attempt_at) == ("failed", 3, None)
    assert len(receiver.received) == 3


def test_an_endpoint_that_does_not_answer_in_time_is_a_retried_timeout(receiver, settings):
    settings.HARNESS_WEBHOOK_TIMEOUT_SECONDS = 0.5
    row = deliver(receiver, "/slow")
    assert (row.status, row.response_code, row.last_error) == ("pending", None, "No answer within 0.5 s.")


def test_a_redirect_is_not_followed_and_fails_at_once(receiver):
    row = deliver(receiver, "/loop")
    assert (row.status, row.response_code, row.attempts) == ("failed", 307, 1)
    assert "do not follow redirects" in row.last_error
    assert len(receiver.received) == 1


def test_the_sweeper_sends_due_retries_and_lost_jobs_once(settings):
    execution = failed_execution()
    webhook("http://127.0.0.1:9/", HostEvent.EXECUTION_FAILED)
    [pk] = listeners.fan_out(HostEvent.EXECUTION_FAILED, execution.pk, {})
    now = timezone.now()

    assert delivery.send_due(now) == 0, "a fresh delivery's own job is still on its way"
    # Without a queue to reach (no Redis here) the job is not sent, but the row is moved on all the same.
    settings.RQ_QUEUES = {"default": {"URL": "redis://127.0.0.1:9/0", "DEFAULT_TIMEOUT": 60}}
    later = now + delivery.REQUEUE_AFTER + timedelta(seconds=1)
    delivery.send_due(later)
    assert WebhookDelivery.objects.get(pk=pk).next_attempt_at == later + delivery.REQUEUE_AFTER


def test_an_attempt_cut_off_by_a_killed_worker_is_tried_again(settings):
    execution = failed_execution()
    webhook("http://127.0.0.1:9/", HostEvent.EXECUTION_FAILED)
    [pk] = listeners.fan_out(HostEvent.EXECUTION_FAILED, execution.pk, {})
    long_ago = timezone.now() - timedelta(hours=1)
    WebhookDelivery.objects.filter(pk=pk).update(status=DeliveryStatus.SENDING, attempts=1, last_attempt_at=long_ago)
    settings.RQ_QUEUES = {"default": {"URL": "redis://127.0.0.1:9/0", "DEFAULT_TIMEOUT": 60}}

    delivery.send_due(timezone.now())

    row = WebhookDelivery.objects.get(pk=pk)
    assert (row.status, row.last_error) == ("pending", "The attempt did not finish (its worker stopped).")


def test_send_again_starts_a_new_round_of_attempts_from_the_admin(receiver, admin_client):
    row = deliver(receiver, "/loop")
    assert row.status == "failed"

    response = admin_client.post(
        reverse("admin:alerts_webhookdelivery_changelist"),
        {"action": "send_again", "_selected_action": [row.pk]},
        follow=True,
    )

    assert "1 deliveries queued to be sent again." in response.content.decode()
    row.refresh_from_db()
    assert (row.status, row.attempts) == ("pending", 0)
    delivery.attempt(row.pk)
    assert len(receiver.received) == 2


def test_the_delivery_log_is_read_only(admin_client):
    row = deliver_nowhere()
    page = admin_client.get(reverse("admin:alerts_webhookdelivery_change", args=[row.pk]))
    assert page.status_code == 200 and 'name="status"' not in page.content.decode()


def deliver_nowhere() -> WebhookDelivery:
    execution = failed_execution()
    webhook("http://127.0.0.1:9/", HostEvent.EXECUTION_FAILED)
    [pk] = listeners.fan_out(HostEvent.EXECUTION_FAILED, execution.pk, {})
    return WebhookDelivery.objects.get(pk=pk)


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("url", "ftp://example.com/hook", "Enter a valid URL."),
        ("url", "not a url", "Enter a valid URL."),
        ("events", None, "This field is required."),
        ("events", "approval.sneaky", "Select a valid choice."),
    ],
)
def test_the_webhook_form_refuses_bad_input_and_saves_nothing(admin_client, field, value, error):
    team = Team.objects.get_or_create(name=DEFAULT_TEAM)[0]
    form = {
        "name": "ops",
        "team": team.pk,
        "url": "https://hooks.example.com/x",
        "format": "json",
        "events": ["execution.failed"],
        "secret": "x" * 32,
        "active": "on",
    }
    if value is None:
        del form[field]
    else:
        form[field] = value
    response = admin_client.post(reverse("admin:alerts_webhook_add"), form)
    assert response.status_code == 200
    assert error in response.content.decode()
    assert not Webhook.objects.exists()


def test_the_worker_accepts_the_delivery_job():
    assert JOB_FUNCTIONS["alerts.jobs.deliver_webhook"] == 1
    assert JOB_FUNCTIONS["alerts.jobs.drain_webhooks"] == 0
    assert payloads.subject_of(HostEvent.EXECUTION_RECOVERED, 4, {"run": 9}) == "run:9"


def test_one_drain_sends_every_new_delivery_and_leaves_retries_to_their_time(receiver, settings):
    settings.RQ_QUEUES = {"default": {"URL": "redis://127.0.0.1:9/0", "DEFAULT_TIMEOUT": 60}}
    webhook(f"{receiver.url}/ok", HostEvent.EXECUTION_COMPLETED)
    thread = factories.make_thread()
    fresh = [
        listeners.fan_out(HostEvent.EXECUTION_COMPLETED, factories.make_execution(thread, status="completed").pk, {})
        for _ in range(3)
    ]
    retry = WebhookDelivery.objects.get(pk=fresh[0][0])
    WebhookDelivery.objects.filter(pk=retry.pk).update(attempts=1, next_attempt_at=timezone.now() + timedelta(hours=1))

    assert delivery.drain() == 2
    assert len(receiver.received) == 2
    assert set(WebhookDelivery.objects.values_list("status", flat=True)) == {"delivered", "pending"}
    assert WebhookDelivery.objects.get(pk=retry.pk).status == "pending"
