from django.urls import path

from runs import approval_urls, views

app_name = "runs"

urlpatterns = [
    path("", views.threads, name="threads"),
    path("threads/new/", views.create_thread, name="create_thread"),
    path("threads/<int:pk>/", views.thread_detail, name="thread"),
    path("threads/<int:pk>/executions/", views.start_execution, name="start_execution"),
    path("checkpoints/<int:pk>/fork/", views.fork_checkpoint, name="fork_checkpoint"),
    path("executions/<int:pk>/", views.execution_detail, name="execution"),
    path("executions/<int:pk>/cancel/", views.cancel_execution, name="cancel_execution"),
    path("executions/<int:execution_pk>/events/<int:position>/", views.event_detail, name="event"),
    path("runs/<int:pk>/", views.run_detail, name="run"),
    *approval_urls.urlpatterns,
]
