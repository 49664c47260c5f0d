"""Approved arguments' digests become keyed.

The audit shows `Decision.args_digest` beside the masked arguments; an unkeyed sha256 let any reader confirm a
guess of a masked value. Every stored digest is recomputed, keyed, from the stored approved arguments (a row
without them has no digest). The few lines of service code needed are copied here as they are at 0013.
"""

import hashlib
import json

from django.db import migrations
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


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0012_masked_inputs_and_titles"),
    ]

    operations = [
        migrations.RunPython(key_digests, unkey_digests),
    ]
