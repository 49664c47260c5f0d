from django.urls import path
from django.views.generic import RedirectView

from runs import approval_urls, bulk_views, hold_views, views, what_if_views

app_name = "runs"

urlpatterns = [
    path("", views.threads, name="threads"),
    path("threads/", RedirectView.as_view(pattern_name="runs:threads"), name="threads_alias"),
    path("threads/new/", views.create_thread, name="create_thread"),
    path("threads/<pk:pk>/", views.thread_detail, name="thread"),
    path("threads/<pk:pk>/hold/", hold_views.hold_thread, name="hold_thread"),
    path("threads/<pk:pk>/executions/", views.start_execution, name="start_execution"),
    path("checkpoints/<pk:pk>/fork/", views.fork_checkpoint, name="fork_checkpoint"),
    path("executions/", views.execution_list, name="executions"),
    path("executions/counts/", views.execution_counts, name="execution_counts"),
    path("executions/views/", views.save_view, name="save_view"),
    path("executions/bulk/", bulk_views.bulk_action, name="bulk_action"),
    path("executions/bulk/<pk:pk>/", bulk_views.bulk_operation, name="bulk_operation"),
    path("executions/views/<pk:pk>/delete/", views.delete_view, name="delete_view"),
    path("executions/<pk:pk>/", views.execution_detail, name="execution"),
    path("executions/<pk:pk>/times/", views.execution_times, name="execution_times"),
    path("executions/<pk:pk>/hold/", hold_views.hold_execution, name="hold_execution"),
    path("executions/<pk:pk>/cancel/", views.cancel_execution, name="cancel_execution"),
    path("executions/<pk:pk>/recover/", views.recover_execution, name="recover_execution"),
    path("executions/<pk:pk>/bundle/", views.export_bundle, name="export_bundle"),
    path("executions/<pk:pk>/what-if/", what_if_views.make_what_if, name="what_if"),
    path("executions/<pk:execution_pk>/events/<pk:position>/", views.event_detail, name="event"),
    path("runs/<pk:pk>/", views.run_detail, name="run"),
    path("compare/", views.compare, name="compare"),
    path("usage/", views.usage, name="usage"),
    *approval_urls.urlpatterns,
]
