from django.contrib import admin
from django.urls import include, path

from benchsite.api import api
from benchsite.health import healthz

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    # Before admin/: the admin's catch-all would answer these paths with a 404.
    path("admin/swebench/", include("tasks_app.admin_swebench")),
    path("admin/", admin.site.urls),
    path("api/", api.urls),
    path("", include("benchsite.accounts.urls")),
    path("", include("tasks_app.urls")),
    path("", include("runs.urls")),
]
