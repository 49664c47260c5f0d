"""Teams and memberships: every profile, policy and thread joins the team `default`, and every user joins it with
the rights they had, so an upgrade changes nothing for a single-team install.

Rights before teams: any logged-in user could see everything and start, fork and cancel (an operator); deciding
needed `runs.decide_deferred` (an approver; staff with it also edited profiles and policies: an admin). A
superuser sees everything whatever their memberships; they join as admins so the team lists them.

A policy other than `default` governed nothing before (only the policy named `default` was used); each such policy
gets a team of its own name, without members or profiles, so it still governs nothing until an admin moves
profiles there.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models
from django.db.models import Q

DEFAULT_TEAM = "default"
# Frozen copies of runs.models.TeamRole.
VIEWER, OPERATOR, APPROVER, ADMIN = 10, 20, 30, 40
ROLE_CHOICES = [(VIEWER, "viewer"), (OPERATOR, "operator"), (APPROVER, "approver"), (ADMIN, "admin")]


def _role(user, deciders: set[int]) -> int:
    if user.is_superuser or (user.is_staff and user.pk in deciders):
        return ADMIN
    return APPROVER if user.pk in deciders else OPERATOR


def into_default_team(apps, schema_editor):
    Team = apps.get_model("runs", "Team")
    Membership = apps.get_model("runs", "Membership")
    User = apps.get_model(*settings.AUTH_USER_MODEL.split("."))
    team, _ = Team.objects.get_or_create(name=DEFAULT_TEAM)
    apps.get_model("runs", "AgentProfile").objects.update(team=team)
    apps.get_model("runs", "Thread").objects.update(team=team)
    for policy in apps.get_model("runs", "HostPolicy").objects.order_by("pk"):
        policy.team = team if policy.name == DEFAULT_TEAM else Team.objects.get_or_create(name=policy.name)[0]
        policy.save(update_fields=["team"])
    decide = Q(content_type__app_label="runs", codename="decide_deferred")
    Permission = apps.get_model("auth", "Permission")
    deciders = set(
        User.objects.filter(
            Q(user_permissions__in=Permission.objects.filter(decide))
            | Q(groups__permissions__in=Permission.objects.filter(decide))
        ).values_list("pk", flat=True)
    )
    Membership.objects.bulk_create(
        Membership(user=user, team=team, role=_role(user, deciders)) for user in User.objects.order_by("pk")
    )


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0013_keyed_digests_and_dropped_cancels"),
        ("auth", "0012_alter_user_first_name_max_length"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="Team",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.SlugField(unique=True)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
            ],
            options={"ordering": ["name"]},
        ),
        migrations.CreateModel(
            name="Membership",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("role", models.PositiveSmallIntegerField(choices=ROLE_CHOICES, default=VIEWER)),
                (
                    "team",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="memberships", to="runs.team"
                    ),
                ),
                (
                    "user",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="team_memberships",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "ordering": ["team", "user"],
                "constraints": [models.UniqueConstraint(fields=("user", "team"), name="membership_user_team_unique")],
            },
        ),
        migrations.AddField(
            model_name="agentprofile",
            name="team",
            field=models.ForeignKey(
                null=True, on_delete=django.db.models.deletion.PROTECT, related_name="profiles", to="runs.team"
            ),
        ),
        migrations.AddField(
            model_name="hostpolicy",
            name="team",
            field=models.OneToOneField(
                null=True, on_delete=django.db.models.deletion.PROTECT, related_name="policy", to="runs.team"
            ),
        ),
        migrations.AddField(
            model_name="thread",
            name="team",
            field=models.ForeignKey(
                null=True, on_delete=django.db.models.deletion.PROTECT, related_name="threads", to="runs.team"
            ),
        ),
        migrations.RunPython(into_default_team, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="agentprofile",
            name="team",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.PROTECT, related_name="profiles", to="runs.team"
            ),
        ),
        migrations.AlterField(
            model_name="hostpolicy",
            name="team",
            field=models.OneToOneField(
                on_delete=django.db.models.deletion.PROTECT, related_name="policy", to="runs.team"
            ),
        ),
        migrations.AlterField(
            model_name="thread",
            name="team",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.PROTECT, related_name="threads", to="runs.team"
            ),
        ),
        migrations.AlterField(
            model_name="thread",
            name="thread_id",
            field=models.CharField(max_length=100),
        ),
        migrations.AddConstraint(
            model_name="thread",
            constraint=models.UniqueConstraint(fields=("team", "thread_id"), name="thread_id_unique_per_team"),
        ),
    ]
