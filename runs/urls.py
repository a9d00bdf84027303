from django.urls import path

from runs import views, views_control

urlpatterns = [
    path("runs/<uuid:public_id>/", views.run_detail, name="run-detail"),
    path("attempts/<uuid:public_id>/", views.attempt_detail, name="attempt-detail"),
    path("runs/<uuid:public_id>/cancel/", views_control.run_cancel_view, name="run-cancel"),
    path("runs/<uuid:public_id>/retry/", views_control.run_retry_view, name="run-retry"),
    path("runs/<uuid:public_id>/resume/", views_control.run_resume_view, name="run-resume"),
]
