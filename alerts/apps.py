from django.apps import AppConfig


class AlertsConfig(AppConfig):
    name = "alerts"
    verbose_name = "Alerts"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from alerts import listeners
        from runs.services.store.queued_jobs import allow_job

        listeners.connect()
        allow_job("alerts.jobs.deliver_webhook", 1)
        allow_job("alerts.jobs.drain_webhooks", 0)
