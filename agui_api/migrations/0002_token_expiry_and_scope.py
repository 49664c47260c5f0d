"""API tokens get a scope and an expiry.

Nothing breaks on upgrade: every token issued before this migration gets scope `read+decide` (all a token could
do before) and expires 90 days after the migration runs, whatever HARNESS_API_TOKEN_DAYS says. Issue their
replacements, with the scope each client needs, before then. Tokens issued afterwards default to scope `read`
and to HARNESS_API_TOKEN_DAYS.
"""

from datetime import timedelta

from django.db import migrations, models
from django.utils import timezone

import agui_api.models

UPGRADE_DAYS = 90


def keep_existing_tokens_working(apps, schema_editor):
    ApiToken = apps.get_model("agui_api", "ApiToken")
    ApiToken.objects.update(scope="read+decide", expires_at=timezone.now() + timedelta(days=UPGRADE_DAYS))


class Migration(migrations.Migration):

    dependencies = [
        ("agui_api", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="apitoken",
            name="scope",
            field=models.CharField(
                choices=[
                    ("read", "read: watch event streams"),
                    ("read+decide", "read+decide: also start runs and answer or resume interrupts"),
                ],
                default="read",
                help_text="read: GET /agui/executions/<pk>/events. read+decide: also POST /agui/<profile>/, which "
                "starts runs and answers interrupts (answering still needs the user's permission to decide).",
                max_length=20,
            ),
        ),
        migrations.AddField(
            model_name="apitoken",
            name="expires_at",
            field=models.DateTimeField(null=True),
        ),
        migrations.RunPython(keep_existing_tokens_working, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="apitoken",
            name="expires_at",
            field=models.DateTimeField(
                default=agui_api.models.default_expiry,
                help_text="After this the token no longer authenticates; issue a new one to rotate.",
            ),
        ),
        migrations.AddConstraint(
            model_name="apitoken",
            constraint=models.CheckConstraint(
                condition=models.Q(("scope__in", ["read", "read+decide"])), name="api_token_scope_known"
            ),
        ),
    ]
