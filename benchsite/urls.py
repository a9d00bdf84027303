from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("", include("tasks_app.urls")),
    path("", include("runs.urls")),
]
