from django.urls import path

from . import views

app_name = "agui"

urlpatterns = [
    path("executions/<pk:pk>/events", views.execution_events, name="execution-events"),
    path("<slug:profile>/", views.run_agent, name="run"),
]
