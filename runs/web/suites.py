"""Suite and task pages."""

from __future__ import annotations

import json
import uuid
from urllib.parse import urlencode

from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse

from benchsite.accounts.access import can_write
from benchsite.accounts.models import Action
from runs.models import Attempt, Run
from runs.web.control import SuiteLaunchForm
from sandbox.environments.build import built_instance
from sandbox.environments.envspec import ENV_APPROXIMATE_LABEL
from tasks_app.images import image_progress
from tasks_app.models import Suite, Task

# The suite page lists its tasks a page at a time (Verified has 500, one 15,000 px table).
TASKS_PER_PAGE = 50
ATTEMPTS_SHOWN = 500


def home(request: HttpRequest) -> HttpResponse:
    suites = Suite.objects.with_task_counts().order_by("name")
    runs = Run.objects.select_related("suite", "model_config").order_by("-created_at")[:10]
    return render(request, "tasks_app/home.html", {"suites": suites, "runs": runs})


def suite_detail(request: HttpRequest, name: str) -> HttpResponse:
    suite = get_object_or_404(Suite.objects.with_task_counts(), name=name)
    query = request.GET.get("q", "").strip()[:200]
    tasks = Task.objects.for_suite(suite).order_by("task_id")
    if query:
        tasks = tasks.filter(task_id__icontains=query)
    page = Paginator(tasks, TASKS_PER_PAGE).get_page(request.GET.get("page"))
    runs = (
        Run.objects.filter(suite=suite).select_related("model_config").order_by("-created_at")[:50]
    )
    context = {
        "suite": suite,
        "page": page,
        "q": query,
        "page_query": urlencode({"q": query}) if query else "",
        "runs": runs,
    }
    if can_write(request.user, Action.RUN_LAUNCH):
        context["launch_form"] = SuiteLaunchForm()
    return render(request, "tasks_app/suite_detail.html", context)


def task_detail(request: HttpRequest, suite: str, task_id: str) -> HttpResponse:
    task = get_object_or_404(
        Task.objects.select_related("suite"), suite__name=suite, task_id=task_id
    )
    attempts = list(
        Attempt.objects.filter(task=task)
        .select_related("model_config", "failure_reason", "run")
        .order_by("model_config__name", "-queued_at", "sample_index")[:ATTEMPTS_SHOWN]
    )
    # Two reverse() calls for the whole list instead of two per row.
    zero = str(uuid.UUID(int=0))
    attempt_url = reverse("attempt-detail", args=[zero])
    run_url = reverse("run-detail", args=[zero])
    for attempt in attempts:
        # Attributes for the template only, not fields.
        attempt.url = attempt_url.replace(zero, str(attempt.public_id))  # type: ignore[attr-defined]
        attempt.run_url = run_url.replace(zero, str(attempt.run.public_id))  # type: ignore[attr-defined]
    return render(
        request,
        "tasks_app/task_detail.html",
        {
            "task": task,
            "attempts": attempts,
            "spec_json": json.dumps(task.spec, indent=2, sort_keys=True, default=str),
            "gold_validations": list(task.gold_validations.order_by("backend")),
            "environment": _environment(task),
            "harbor_environment": _harbor_environment(task),
            "image_progress": image_progress(task),
        },
    )


def task_image_progress(request: HttpRequest, suite: str, task_id: str) -> JsonResponse:
    """The task's image pull as JSON (layers, bytes, estimate; ``final`` once it ended), which
    the task page polls while a pull runs (static/js/image_progress.js)."""
    task = get_object_or_404(
        Task.objects.only("image_progress", "image_digest"), suite__name=suite, task_id=task_id
    )
    return JsonResponse(image_progress(task))


def _harbor_environment(task: Task) -> dict | None:
    """A Harbor task's environment: its resources, and the last build of its context on this
    machine (found, built, or the named reason it failed, with the log's tail)."""
    if task.source != "harbor":
        return None
    from sandbox.environments.harbor_image import last_build

    spec = task.spec
    return {
        "docker_image": spec.get("docker_image") or "",
        "last": last_build(spec.get("folder", ""), spec.get("docker_image") or ""),
        "cpus": spec.get("cpus"),
        "memory_mb": spec.get("memory_mb"),
        "storage_mb": spec.get("storage_mb"),
        "allow_internet": spec.get("allow_internet"),
        "agent_timeout_sec": spec.get("agent_timeout_sec"),
        "verifier_timeout_sec": spec.get("verifier_timeout_sec"),
        "build_timeout_sec": spec.get("build_timeout_sec"),
        "build_command": f"ab build-environments {task.suite.name} --task {task.task_id}",
    }


def _environment(task: Task) -> dict | None:
    """How a SWE-bench task's environment is built here: the Python asked and used (an
    approximate environment when they differ) and, when it was built on this machine, the
    dates its installs resolved as of."""
    if task.source != "swebench":
        return None
    built = built_instance(task.task_id)
    if built is not None and built.base_commit != task.repo_commit:
        built = None
    return {
        "approximate": ENV_APPROXIMATE_LABEL in (task.labels or []),
        "built": built,
        # Stored at import (tasks_app.swebench.importer): no reading of the harness here.
        "python_asked": task.python_asked,
        "python_used": task.python_used,
        # What builds it on this machine, to copy (the page cannot run a build itself).
        "build_command": f"ab swebench build {task.suite.name} --instance {task.task_id}",
    }
