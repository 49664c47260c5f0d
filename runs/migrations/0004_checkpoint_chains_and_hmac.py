"""Checkpoints become HMAC-chained deltas; existing (whole-state) checkpoints become bases with an HMAC digest.

A row whose unkeyed sha256 still matches its state is re-signed with the key; a row that no longer matches
keeps its old digest, so it stays refused after the migration as it was before.
"""

import hashlib
import json

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models
from django.utils.crypto import salted_hmac


def digest_of(parent_digest, state_json, history_delta, pending):
    """A checkpoint row's HMAC as the Host computed it when this migration was written (a frozen copy)."""
    pending_json = "" if pending is None else json.dumps(pending, sort_keys=True, separators=(",", ":"))
    message = "\x1f".join((parent_digest, state_json, history_delta, pending_json))
    return salted_hmac("runs.checkpoint.v2", message, secret=settings.CHECKPOINT_KEY, algorithm="sha256").hexdigest()


def sign_existing(apps, schema_editor):
    Checkpoint = apps.get_model("runs", "Checkpoint")
    for row in Checkpoint.objects.only("pk", "state_json", "digest", "pending_deferred_input").iterator():
        if hashlib.sha256(row.state_json.encode()).hexdigest() == row.digest:
            digest = digest_of("", row.state_json, "", row.pending_deferred_input)
            Checkpoint.objects.filter(pk=row.pk).update(digest=digest)


def unsign(apps, schema_editor):
    Checkpoint = apps.get_model("runs", "Checkpoint")
    if Checkpoint.objects.filter(parent__isnull=False).exists():
        raise RuntimeError("delta checkpoints exist; the whole-state format before this migration cannot hold them")
    for row in Checkpoint.objects.only("pk", "state_json", "digest", "pending_deferred_input").iterator():
        if digest_of("", row.state_json, "", row.pending_deferred_input) == row.digest:
            Checkpoint.objects.filter(pk=row.pk).update(digest=hashlib.sha256(row.state_json.encode()).hexdigest())


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0003_tool_dispatch"),
    ]

    operations = [
        migrations.AddField(
            model_name="checkpoint",
            name="base",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="runs.checkpoint",
            ),
        ),
        migrations.AddField(
            model_name="checkpoint",
            name="parent",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="runs.checkpoint",
            ),
        ),
        migrations.AddField(
            model_name="checkpoint",
            name="history_delta",
            field=models.TextField(blank=True, default=""),
            preserve_default=False,
        ),
        migrations.AddConstraint(
            model_name="checkpoint",
            constraint=models.CheckConstraint(
                condition=models.Q(("base__isnull", True), ("parent__isnull", True))
                | models.Q(("base__isnull", False), ("parent__isnull", False)),
                name="checkpoint_delta_has_parent_and_base",
            ),
        ),
        migrations.RunPython(sign_existing, unsign),
    ]
