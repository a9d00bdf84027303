from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

from benchsite.api.site import api
from benchsite.health import healthz

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    # Before admin/: the admin's catch-all would answer these paths with a 404.
    path("admin/swebench/", include("tasks_app.swebench.dataset_admin")),
    path("admin/swebench/", include("runs.imports.admin")),
    path("admin/tasks/", include("tasks_app.uploads.task_admin")),
    path("admin/", admin.site.urls),
    # Pages name the SVG icon; the admin, the API docs and old browsers ask for /favicon.ico.
    path("favicon.ico", RedirectView.as_view(url=static("favicon.svg"), permanent=True)),
    path("api/", api.urls),
    path("", include("benchsite.accounts.urls")),
    path("", include("runs.urls")),
]
