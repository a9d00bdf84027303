"""A model configuration's page: what it calls and how, its budgets, and its condition (the
files it adds to the workspace before the agent starts), with its runs."""

from __future__ import annotations

from django.contrib.auth.views import redirect_to_login
from django.db.models import Max
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from benchsite.accounts.access import can_read_leaderboards
from runs.models import AgentVariant, Attempt, ModelConfig, Run

RUNS_SHOWN = 50


def model_config_detail(request: HttpRequest, slug: str) -> HttpResponse:
    # Readable as the leaderboards are: the API's /api/model-configs reads the same.
    if not can_read_leaderboards(request.user):
        return redirect_to_login(request.get_full_path())
    config = get_object_or_404(ModelConfig, slug=slug)
    others = [
        c
        for c in ModelConfig.objects.exclude(id=config.id).defer("workspace_files")
        if c.agent_key() == config.agent_key()
    ]
    runs = list(
        Run.objects.filter(model_config=config)
        .select_related("suite")
        .order_by("-created_at")[:RUNS_SHOWN]
    )
    imported = config.agent_variant == AgentVariant.EXTERNAL
    context = {
        "config": config,
        "imported": imported,
        # An imported system's budgets are not ours: what its attempts show instead.
        "observed": Attempt.objects.filter(model_config=config).aggregate(
            calls=Max("steps"), wall=Max("duration_sec")
        )
        if imported
        else {},
        "files": sorted(config.workspace_files.items()),
        "sampling": config.sampling_params(),
        "conditions": others,
        "runs": runs,
    }
    return render(request, "runs/model_config_detail.html", context)
