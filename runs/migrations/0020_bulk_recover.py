"""Bulk operations may recover failed executions (start their recovery runs)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0019_retention"),
    ]

    operations = [
        migrations.AlterField(
            model_name="bulkoperation",
            name="action",
            field=models.CharField(
                choices=[("approve", "Approve"), ("deny", "Deny"), ("cancel", "Cancel"), ("recover", "Recover")],
                max_length=16,
            ),
        ),
    ]
