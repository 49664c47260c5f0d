"""Mask the timeline rows written before the redaction boundary existed.

Before it, only a few content fields were masked (not CUSTOM values, interrupts or raw events, and streamed
deltas one at a time). Every stored event of an execution whose policy version redacts is masked again, run by
run in position order, keeping positions; rows already masked stay as they are.
"""

from django.db import migrations

from ._frozen_redaction import TimelineRedactor, redactor_for


def remask_timelines(apps, schema_editor):
    Execution = apps.get_model("runs", "Execution")
    TimelineEvent = apps.get_model("runs", "TimelineEvent")
    for execution in Execution.objects.select_related("policy_version").iterator():
        redactor = redactor_for(execution.policy_version)
        if not redactor:
            continue
        for run_pk in execution.runs.order_by("number").values_list("pk", flat=True):
            rows = list(TimelineEvent.objects.filter(run_id=run_pk).order_by("position"))
            masked = TimelineRedactor(redactor).remask([row.event for row in rows])
            changed = []
            for row, event in zip(rows, masked, strict=True):
                if event != row.event:
                    row.event = event
                    changed.append(row)
            TimelineEvent.objects.bulk_update(changed, ["event"], batch_size=500)


class Migration(migrations.Migration):
    dependencies = [("runs", "0008_start_submission")]

    operations = [migrations.RunPython(remask_timelines, migrations.RunPython.noop)]
