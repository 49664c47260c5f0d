from django.apps import AppConfig


class ObserversConfig(AppConfig):
    name = "observers"
    verbose_name = "Timeline observers"
