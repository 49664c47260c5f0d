"""Create the demo operator that `bin/run` prints, for a local install; production gets none."""

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from runs.demo_operator import ensure_demo_operator


class Command(BaseCommand):
    help = "Create the demo operator (superuser with the approval permission) if no account has its name."

    def handle(self, *args: Any, **options: Any) -> None:
        if settings.PRODUCTION:
            self.stdout.write(
                "HARNESS_ENV=production: no demo operator; create accounts with manage.py createsuperuser."
            )
            return
        self.stdout.write(ensure_demo_operator())
