"""The URLs of the pages: home, suites and tasks with their runs, runs, attempts and suite
results (the views are in runs/web/)."""

from django.urls import path

from runs.search.views import search_page
from runs.web import attempt_list, attempts, charts, configs, control, results, runs, suites

urlpatterns = [
    path("", suites.home, name="home"),
    path("search/", search_page, name="transcript-search"),
    path("suites/<slug:name>/", suites.suite_detail, name="suite-detail"),
    path(
        "suites/<slug:suite>/image-progress/<path:task_id>",
        suites.task_image_progress,
        name="task-image-progress",
    ),
    path("suites/<slug:suite>/tasks/<path:task_id>/", suites.task_detail, name="task-detail"),
    path("runs/<uuid:public_id>/", runs.run_detail, name="run-detail"),
    path("runs/<uuid:public_id>/progress/", runs.run_progress, name="run-progress"),
    path("runs/<uuid:public_id>/cancel/", control.run_cancel_view, name="run-cancel"),
    path("runs/<uuid:public_id>/retry/", control.run_retry_view, name="run-retry"),
    path("runs/<uuid:public_id>/resume/", control.run_resume_view, name="run-resume"),
    path("runs/<uuid:public_id>/evaluate/", control.run_evaluate_view, name="run-evaluate"),
    path("attempts/<uuid:public_id>/", attempts.attempt_detail, name="attempt-detail"),
    path("attempts/<uuid:a>/vs/<uuid:b>/", attempts.attempt_vs, name="attempt-vs"),
    path(
        "attempts/<uuid:public_id>/artifacts/<path:path>",
        attempts.attempt_artifact,
        name="attempt-artifact",
    ),
    path(
        "attempts/<uuid:public_id>/transcript.atif.json",
        attempts.attempt_atif,
        name="attempt-atif",
    ),
    path(
        "attempts/<uuid:public_id>/<str:which>.diff",
        attempts.attempt_patch,
        name="attempt-patch",
    ),
    path("configs/<slug:slug>/", configs.model_config_detail, name="model-config-detail"),
    path("suites/<slug:name>/launch/", control.suite_launch_view, name="suite-launch"),
    path("suites/<slug:name>/leaderboard/", results.leaderboard, name="suite-leaderboard"),
    path("suites/<slug:name>/compare/", results.compare, name="suite-compare"),
    path("suites/<slug:name>/taxonomy/", results.taxonomy, name="suite-taxonomy"),
    path(
        "suites/<slug:name>/taxonomy/chart.json",
        charts.taxonomy_chart,
        name="suite-taxonomy-chart",
    ),
    path("suites/<slug:name>/attempts/", attempt_list.suite_attempts, name="suite-attempts"),
]
