"""Range CHECK constraints on the numbers of a policy version.

Rows written before the constraints existed may hold values the worker and the sweeper cannot use (a lease of
10**15 seconds overflows `timedelta`). Versions are otherwise immutable, but such a row would make the
constraint fail to apply, so it is clamped into range first; each clamped version says so in its comment and
the migration prints it.
"""

from django.db import migrations, models

# Frozen here: a later change of the model's limits comes with its own migration.
LIMITS = {
    "max_attempts": (1, 20),
    "lease_seconds": (1, 3600),
    "approval_timeout_seconds": (0, 2592000),
}


def clamp_out_of_range_versions(apps, schema_editor):
    HostPolicyVersion = apps.get_model("runs", "HostPolicyVersion")
    for version in HostPolicyVersion.objects.order_by("pk"):
        notes = []
        for name, (low, high) in LIMITS.items():
            value = getattr(version, name)
            clamped = min(max(value, low), high)
            if clamped != value:
                setattr(version, name, clamped)
                notes.append(f"{name} {value} -> {clamped}")
        if notes:
            note = f"[migration 0005 clamped out-of-range values: {', '.join(notes)}]"
            version.comment = f"{version.comment}\n{note}" if version.comment else note
            version.save(update_fields=[*LIMITS, "comment"])
            print(f"\n  policy version {version.pk} (number {version.number}): {note}")


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0004_checkpoint_chains_and_hmac"),
    ]

    operations = [
        migrations.RunPython(clamp_out_of_range_versions, migrations.RunPython.noop),
        *(
            migrations.AddConstraint(
                model_name="hostpolicyversion",
                constraint=models.CheckConstraint(
                    condition=models.Q((f"{name}__gte", low), (f"{name}__lte", high)),
                    name=f"policy_version_{name}_range",
                ),
            )
            for name, (low, high) in LIMITS.items()
        ),
    ]
