"""Suite and task pages."""

from __future__ import annotations

import json

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from runs.models import Attempt, Run
from tasks_app.models import Suite, Task

TASKS_SHOWN = 1000


def home(request: HttpRequest) -> HttpResponse:
    suites = Suite.objects.with_task_counts().order_by("name")
    runs = Run.objects.select_related("suite", "model_config").order_by("-created_at")[:10]
    return render(request, "tasks_app/home.html", {"suites": suites, "runs": runs})


def suite_detail(request: HttpRequest, name: str) -> HttpResponse:
    suite = get_object_or_404(Suite.objects.with_task_counts(), name=name)
    tasks = Task.objects.for_suite(suite).order_by("task_id")[:TASKS_SHOWN]
    runs = (
        Run.objects.filter(suite=suite).select_related("model_config").order_by("-created_at")[:50]
    )
    return render(
        request,
        "tasks_app/suite_detail.html",
        {"suite": suite, "tasks": tasks, "runs": runs, "capped": suite.task_count > TASKS_SHOWN},
    )


def task_detail(request: HttpRequest, suite: str, task_id: str) -> HttpResponse:
    task = get_object_or_404(
        Task.objects.select_related("suite"), suite__name=suite, task_id=task_id
    )
    attempts = (
        Attempt.objects.filter(task=task)
        .select_related("model_config", "failure_reason", "run")
        .order_by("model_config__name", "-queued_at", "sample_index")
    )
    return render(
        request,
        "tasks_app/task_detail.html",
        {
            "task": task,
            "attempts": attempts[:500],
            "spec_json": json.dumps(task.spec, indent=2, sort_keys=True, default=str),
        },
    )
