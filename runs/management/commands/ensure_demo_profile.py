"""Create the demo agent profile for a local install, so the AG-UI example and the New thread form work at once."""

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from runs.demo_profile import DEMO_PROFILE, ensure_demo_profile
from runs.models import AgentProfile


class Command(BaseCommand):
    help = "Create the demo agent profile (offline demo model, every host tool) if no profile has its name."

    def handle(self, *args: Any, **options: Any) -> None:
        if settings.PRODUCTION:
            self.stdout.write("HARNESS_ENV=production: no demo profile; create yours with manage.py harness_profile.")
            return
        existed = AgentProfile.objects.filter(name=DEMO_PROFILE).exists()
        profile = ensure_demo_profile()
        if existed:
            self.stdout.write(f"The agent profile '{profile.name}' exists (left as it is).")
        else:
            self.stdout.write(f"Created the agent profile '{profile.name}' (offline demo model, every host tool).")
