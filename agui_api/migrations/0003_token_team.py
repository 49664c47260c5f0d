"""An API token may be narrowed to one team of its user. Existing tokens stay unnarrowed: they act in every team
of their user, as before."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("agui_api", "0002_token_expiry_and_scope"),
        ("runs", "0014_teams"),
    ]

    operations = [
        migrations.AddField(
            model_name="apitoken",
            name="team",
            field=models.ForeignKey(
                blank=True,
                help_text="Empty: the token acts in every team of its user. A team: only there (and only while its user is a member).",
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="api_tokens",
                to="runs.team",
            ),
        ),
        migrations.AlterField(
            model_name="apitoken",
            name="scope",
            field=models.CharField(
                choices=[
                    ("read", "read: watch event streams"),
                    ("read+decide", "read+decide: also start runs and answer or resume interrupts"),
                ],
                default="read",
                help_text="read: GET /agui/executions/<pk>/events. read+decide: also POST /agui/<profile>/, which starts runs and answers interrupts (each still needs the user's role in the team: operator to start, approver to decide approvals).",
                max_length=20,
            ),
        ),
    ]
