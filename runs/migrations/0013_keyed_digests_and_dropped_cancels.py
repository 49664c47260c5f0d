"""Approved arguments' digests become keyed, and a cancel request a waiting execution still holds is dropped.

The audit shows `Decision.args_digest` beside the masked arguments; an unkeyed sha256 let any reader confirm a
guess of a masked value. Every stored digest is recomputed, keyed, from the stored approved arguments (a row
without them has no digest). A waiting execution that still holds a cancel request (its run suspended before a
heartbeat saw it) would have its resume cancelled after an approver's answer: the request is dropped and
recorded as the worker now does. The few lines of service code needed are copied here as they are at 0013.
"""

import hashlib
import json

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models
from django.utils import timezone
from django.utils.crypto import salted_hmac

CHUNK = 500
ARGS_DIGEST_SALT = "runs.decision.args_digest.v1"


def _canonical_json(value):
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _keyed(args):
    return salted_hmac(ARGS_DIGEST_SALT, _canonical_json(args), algorithm="sha256").hexdigest()


def _unkeyed(args):
    return hashlib.sha256(_canonical_json(args).encode()).hexdigest()


def _redigest(apps, digest_of):
    Decision = apps.get_model("runs", "Decision")
    Decision.objects.filter(approved_args__isnull=True).exclude(args_digest="").update(args_digest="")
    decisions = Decision.objects.filter(approved_args__isnull=False).only("pk", "approved_args").order_by("pk")
    last = 0
    while chunk := list(decisions.filter(pk__gt=last)[:CHUNK]):
        for decision in chunk:
            decision.args_digest = digest_of(decision.approved_args)
        Decision.objects.bulk_update(chunk, ["args_digest"])
        last = chunk[-1].pk


def key_digests(apps, schema_editor):
    _redigest(apps, _keyed)


def unkey_digests(apps, schema_editor):
    _redigest(apps, _unkeyed)


def drop_waiting_cancel_requests(apps, schema_editor):
    Execution = apps.get_model("runs", "Execution")
    Run = apps.get_model("runs", "Run")
    DroppedCancelRequest = apps.get_model("runs", "DroppedCancelRequest")
    now = timezone.now()
    held = Execution.objects.filter(status="waiting", cancel_requested=True)
    for execution in held:
        DroppedCancelRequest.objects.create(
            execution=execution,
            run=Run.objects.filter(execution=execution).order_by("-number").first(),
            requested_by_id=execution.cancelled_by_id,
            requested_at=execution.cancelled_at or now,
        )
    held.update(cancel_requested=False, cancelled_by=None, cancelled_at=None)


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0012_masked_inputs_and_titles"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="DroppedCancelRequest",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("requested_at", models.DateTimeField()),
                ("dropped_at", models.DateTimeField(auto_now_add=True)),
                (
                    "execution",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="dropped_cancel_requests",
                        to="runs.execution",
                    ),
                ),
                (
                    "requested_by",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "run",
                    models.ForeignKey(
                        help_text="The run that suspended.",
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="runs.run",
                    ),
                ),
            ],
            options={
                "ordering": ["execution", "requested_at", "id"],
            },
        ),
        migrations.RunPython(key_digests, unkey_digests),
        # Going back leaves the requests dropped (their records go with the table): carrying one over to a
        # resume is what this migration ends.
        migrations.RunPython(drop_waiting_cancel_requests, migrations.RunPython.noop),
    ]
