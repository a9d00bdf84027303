from django.urls import path

from runs import views

urlpatterns = [
    path("runs/<uuid:public_id>/", views.run_detail, name="run-detail"),
    path("attempts/<uuid:public_id>/", views.attempt_detail, name="attempt-detail"),
]
