from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "runs"
    verbose_name = "Harness runs"

    def ready(self) -> None:
        from django.core import checks
        from django.urls import register_converter

        from runs.checks import TAG, check_demo_password, check_settings
        from runs.converters import RecordNumberConverter

        checks.register(check_settings, TAG)
        checks.register(check_demo_password, TAG)

        # Before any URLconf is loaded: the routes use `<pk:...>` for every record number.
        register_converter(RecordNumberConverter, "pk")
