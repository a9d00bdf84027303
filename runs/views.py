from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from runs.models import Attempt, Run


def run_detail(request: HttpRequest, public_id: str) -> HttpResponse:
    run = get_object_or_404(
        Run.objects.select_related("suite", "model_config"), public_id=public_id
    )
    return render(request, "runs/run_detail.html", {"run": run})


def attempt_detail(request: HttpRequest, public_id: str) -> HttpResponse:
    attempt = get_object_or_404(
        Attempt.objects.select_related("task__suite", "model_config", "failure_reason", "run"),
        public_id=public_id,
    )
    return render(request, "runs/attempt_detail.html", {"attempt": attempt})
