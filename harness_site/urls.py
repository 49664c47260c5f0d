from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from harness_site.health import health

urlpatterns = [
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("health/", health, name="health"),
    path("agui/", include("agui_api.urls")),
    path("", include("runs.urls")),
]
