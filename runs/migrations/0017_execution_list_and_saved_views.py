"""The executions list (its indexes, one per filter, ending with the newest-first key) and saved views."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0014_teams"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="SavedView",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.CharField(max_length=60)),
                ("query", models.CharField(blank=True, max_length=2000)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
            ],
            options={
                "ordering": ["user", "name"],
            },
        ),
        migrations.AddIndex(
            model_name="deferredrequest",
            index=models.Index(fields=["tool_name", "execution"], name="deferred_request_tool"),
        ),
        migrations.AddIndex(
            model_name="execution",
            index=models.Index(fields=["created_at", "id"], name="execution_newest"),
        ),
        migrations.AddIndex(
            model_name="execution",
            index=models.Index(fields=["status", "created_at", "id"], name="execution_status_newest"),
        ),
        migrations.AddIndex(
            model_name="execution",
            index=models.Index(fields=["failure_code", "created_at", "id"], name="execution_failure_newest"),
        ),
        migrations.AddIndex(
            model_name="execution",
            index=models.Index(fields=["created_by", "created_at", "id"], name="execution_starter_newest"),
        ),
        migrations.AddIndex(
            model_name="tooldispatch",
            index=models.Index(fields=["tool_name", "run"], name="tool_dispatch_tool"),
        ),
        migrations.AddField(
            model_name="savedview",
            name="user",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE, related_name="saved_views", to=settings.AUTH_USER_MODEL
            ),
        ),
        migrations.AddConstraint(
            model_name="savedview",
            constraint=models.UniqueConstraint(fields=("user", "name"), name="saved_view_name_unique_per_user"),
        ),
    ]
