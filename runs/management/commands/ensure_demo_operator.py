"""Create (or refresh) the demo operator account that `bin/run` prints, so a new install can log in."""

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.management.base import BaseCommand

DEMO_USERNAME = "operator"
DEMO_PASSWORD = "operator"


class Command(BaseCommand):
    help = "Create the demo operator (staff, with the approval permission) if it does not exist."

    def handle(self, *args, **options):
        user_model = get_user_model()
        user, created = user_model.objects.get_or_create(username=DEMO_USERNAME)
        if created:
            user.set_password(DEMO_PASSWORD)
        user.is_staff = True
        user.is_superuser = True
        user.save()
        # The approval permission is granted explicitly too, so the account still works if made non-superuser.
        for perm in Permission.objects.filter(content_type__app_label="runs", codename="decide_deferred"):
            user.user_permissions.add(perm)
        verb = "Created" if created else "Kept"
        self.stdout.write(f"{verb} demo operator '{DEMO_USERNAME}'.")
