from django.apps import AppConfig


class AguiApiConfig(AppConfig):
    name = "agui_api"
    verbose_name = "AG-UI endpoint"
    default_auto_field = "django.db.models.BigAutoField"
