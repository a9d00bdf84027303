from django.urls import path

from tasks_app import views

urlpatterns = [
    path("", views.home, name="home"),
    path("suites/<slug:name>/", views.suite_detail, name="suite-detail"),
    path("suites/<slug:suite>/tasks/<path:task_id>/", views.task_detail, name="task-detail"),
]
