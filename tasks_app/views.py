from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from tasks_app.models import Suite, Task


def home(request: HttpRequest) -> HttpResponse:
    suites = Suite.objects.with_task_counts().order_by("name")
    return render(request, "tasks_app/home.html", {"suites": suites})


def suite_detail(request: HttpRequest, name: str) -> HttpResponse:
    suite = get_object_or_404(Suite.objects.with_task_counts(), name=name)
    tasks = Task.objects.for_suite(suite).order_by("task_id")
    return render(request, "tasks_app/suite_detail.html", {"suite": suite, "tasks": tasks})


def task_detail(request: HttpRequest, suite: str, task_id: str) -> HttpResponse:
    task = get_object_or_404(
        Task.objects.select_related("suite"), suite__name=suite, task_id=task_id
    )
    return render(request, "tasks_app/task_detail.html", {"task": task})
