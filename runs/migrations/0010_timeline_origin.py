"""Timeline rows say whose item they are: the run's AG-UI stream, or the Host's (a decision item).

Decision items stored before the column existed are the CUSTOM `a13n.host.decision` rows without a journal entry.
"""

from django.db import migrations, models


def mark_decision_items(apps, schema_editor):
    TimelineEvent = apps.get_model("runs", "TimelineEvent")
    TimelineEvent.objects.filter(
        event_type="CUSTOM", journal_entry__isnull=True, event__name="a13n.host.decision"
    ).update(origin="host")


class Migration(migrations.Migration):
    dependencies = [("runs", "0009_remask_timeline")]

    operations = [
        migrations.AddField(
            model_name="timelineevent",
            name="origin",
            field=models.CharField(choices=[("run", "Run"), ("host", "Host")], default="run", max_length=8),
        ),
        migrations.RunPython(mark_decision_items, migrations.RunPython.noop),
    ]
