"""The executions list (its indexes, one per filter, ending with the newest-first key), saved views and bulk operations."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0016_model_prices"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="BulkItem",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                (
                    "outcome",
                    models.CharField(
                        choices=[
                            ("pending", "Pending"),
                            ("taken", "Taken"),
                            ("done", "Done"),
                            ("skipped", "Skipped"),
                            ("refused", "Refused"),
                        ],
                        default="pending",
                        max_length=16,
                    ),
                ),
                ("message", models.TextField(blank=True)),
                ("finished_at", models.DateTimeField(blank=True, null=True)),
            ],
            options={
                "ordering": ["operation", "id"],
            },
        ),
        migrations.CreateModel(
            name="BulkOperation",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                (
                    "action",
                    models.CharField(
                        choices=[("approve", "Approve"), ("deny", "Deny"), ("cancel", "Cancel")], max_length=16
                    ),
                ),
                ("message", models.TextField(blank=True, help_text="The reason sent with each denial.")),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("finished_at", models.DateTimeField(blank=True, null=True)),
            ],
            options={
                "ordering": ["-id"],
            },
        ),
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
            model_name="bulkitem",
            name="execution",
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="+", to="runs.execution"),
        ),
        migrations.AddField(
            model_name="bulkoperation",
            name="user",
            field=models.ForeignKey(
                null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="+", to=settings.AUTH_USER_MODEL
            ),
        ),
        migrations.AddField(
            model_name="bulkitem",
            name="operation",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE, related_name="items", to="runs.bulkoperation"
            ),
        ),
        migrations.AddField(
            model_name="savedview",
            name="user",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE, related_name="saved_views", to=settings.AUTH_USER_MODEL
            ),
        ),
        migrations.AddConstraint(
            model_name="bulkitem",
            constraint=models.UniqueConstraint(fields=("operation", "execution"), name="bulk_item_once"),
        ),
        migrations.AddConstraint(
            model_name="savedview",
            constraint=models.UniqueConstraint(fields=("user", "name"), name="saved_view_name_unique_per_user"),
        ),
    ]
