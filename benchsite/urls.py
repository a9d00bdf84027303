from django.contrib import admin
from django.urls import include, path

from benchsite.api import api

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", api.urls),
    path("", include("benchsite.accounts.urls")),
    path("", include("tasks_app.urls")),
    path("", include("runs.urls")),
]
