from django.urls import path

from runs import views, views_attempts, views_charts, views_control, views_results

urlpatterns = [
    path("runs/<uuid:public_id>/", views.run_detail, name="run-detail"),
    path("runs/<uuid:public_id>/progress/", views.run_progress, name="run-progress"),
    path("runs/<uuid:public_id>/cancel/", views_control.run_cancel_view, name="run-cancel"),
    path("runs/<uuid:public_id>/retry/", views_control.run_retry_view, name="run-retry"),
    path("runs/<uuid:public_id>/resume/", views_control.run_resume_view, name="run-resume"),
    path("runs/<uuid:public_id>/evaluate/", views_control.run_evaluate_view, name="run-evaluate"),
    path("attempts/<uuid:public_id>/", views_attempts.attempt_detail, name="attempt-detail"),
    path("attempts/<uuid:a>/vs/<uuid:b>/", views_attempts.attempt_vs, name="attempt-vs"),
    path(
        "attempts/<uuid:public_id>/artifacts/<path:path>",
        views_attempts.attempt_artifact,
        name="attempt-artifact",
    ),
    path(
        "attempts/<uuid:public_id>/<str:which>.diff",
        views_attempts.attempt_patch,
        name="attempt-patch",
    ),
    path("suites/<slug:name>/launch/", views_control.suite_launch_view, name="suite-launch"),
    path("suites/<slug:name>/leaderboard/", views_results.leaderboard, name="suite-leaderboard"),
    path("suites/<slug:name>/compare/", views_results.compare, name="suite-compare"),
    path("suites/<slug:name>/taxonomy/", views_results.taxonomy, name="suite-taxonomy"),
    path(
        "suites/<slug:name>/taxonomy/chart.json",
        views_charts.taxonomy_chart,
        name="suite-taxonomy-chart",
    ),
    path("suites/<slug:name>/attempts/", views_results.suite_attempts, name="suite-attempts"),
]
