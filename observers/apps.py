from django.apps import AppConfig


class ObserversConfig(AppConfig):
    name = "observers"
    verbose_name = "Timeline observers"

    def ready(self) -> None:
        from django.contrib.auth.signals import user_logged_out

        from observers.authenticated import end_session_sockets

        user_logged_out.connect(end_session_sockets, dispatch_uid="observers.end_session_sockets")
