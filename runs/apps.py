from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "runs"
    verbose_name = "Harness runs"

    def ready(self) -> None:
        from django.urls import register_converter

        from runs.converters import RecordNumberConverter

        # Before any URLconf is loaded: the routes use `<pk:...>` for every record number.
        register_converter(RecordNumberConverter, "pk")
