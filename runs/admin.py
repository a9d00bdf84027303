from django.contrib import admin
from django.db import models

from benchsite.accounts.access import can_write
from benchsite.accounts.models import Action, Door
from runs.admin_actions import cancel_runs, evaluate_runs, launch_runs, resume_runs, retry_runs
from runs.model_configs import UPSTREAM_FIELDS, model_config_save
from runs.models import Attempt, AttemptStage, FailureReason, ModelConfig, Run
from runs.prices import PriceEntry


@admin.register(FailureReason)
class FailureReasonAdmin(admin.ModelAdmin):
    list_display = ["precedence", "code", "description", "typical_cause", "category"]
    list_display_links = ["code"]
    list_filter = ["category"]
    search_fields = ["code", "description"]
    ordering = ["precedence"]


@admin.register(ModelConfig)
class ModelConfigAdmin(admin.ModelAdmin):
    list_display = [
        "name",
        "agent_variant",
        "model_name",
        "base_url",
        "max_steps",
        "condition",
        "created_at",
    ]
    # workspace_files is edited as JSON ({path: text}); the model's clean() checks it.
    readonly_fields = ["condition"]
    list_filter = ["agent_variant"]
    search_fields = ["name", "model_name", "base_url"]
    prepopulated_fields = {"slug": ["name"]}
    actions = [launch_runs]

    def get_readonly_fields(self, request, obj=None):
        # Where the worker's key goes is for superusers
        # (benchsite.accounts.models.Action.MODEL_CONFIG_UPSTREAM): other staff see the two
        # fields but cannot set them, on the add page too.
        fields = list(super().get_readonly_fields(request, obj))
        if not can_write(request.user, Action.MODEL_CONFIG_UPSTREAM):
            fields += [f for f in UPSTREAM_FIELDS if f not in fields]
        return fields

    def save_model(self, request, obj, form, change) -> None:
        # The form validated it; the service checks the upstream right, saves and audits.
        before = ModelConfig.objects.filter(pk=obj.pk).first() if change else None
        model_config_save(
            config=obj, before=before, actor=request.user, door=Door.ADMIN, request=request
        )


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = [
        "public_id",
        "suite",
        "model_config",
        "samples",
        "status",
        "source",
        "created_at",
    ]
    list_filter = ["status", "source", "suite", "model_config"]
    list_select_related = ["suite", "model_config"]
    search_fields = ["public_id", "model_config__name", "suite__name", "fail_fast_reason"]
    readonly_fields = ["public_id", "created_at", "started_at", "finished_at"]
    date_hierarchy = "created_at"
    actions = [cancel_runs, retry_runs, resume_runs, evaluate_runs]


class AttemptStageInline(admin.TabularInline):
    model = AttemptStage
    extra = 0
    # A tuple: one value fits both attributes' types in django-stubs (a list fits only one).
    readonly_fields = (
        "order",
        "name",
        "command",
        "exit_code",
        "duration_sec",
        "timed_out",
        "output_path",
    )
    fields = readonly_fields


@admin.register(Attempt)
class AttemptAdmin(admin.ModelAdmin):
    list_display = [
        "public_id",
        "task",
        "model_config",
        "sample_index",
        "status",
        "failure_reason",
        "is_infra",
        "duration_sec",
    ]
    list_filter = ["status", "failure_reason", "is_infra", "is_timeout", "suite", "model_config"]
    list_select_related = ["task__suite", "model_config", "failure_reason"]
    search_fields = ["public_id", "task__task_id", "error_fingerprint", "model_config__name"]
    raw_id_fields = ["run", "task"]
    # The state and verdict are runs.lifecycle's alone (the run actions: cancel, retry,
    # resume, evaluate): a hand edit here would bypass its compare-and-set and the run's
    # tallies.
    readonly_fields = [
        "public_id",
        "status",
        "failure_reason",
        "failure_stage",
        "is_infra",
        "is_timeout",
        "queued_at",
        "started_at",
        "heartbeat_at",
        "finished_at",
    ]
    inlines = [AttemptStageInline]


@admin.register(AttemptStage)
class AttemptStageAdmin(admin.ModelAdmin):
    list_display = ["attempt", "order", "name", "exit_code", "duration_sec", "timed_out"]
    list_filter = ["name", "timed_out"]
    raw_id_fields = ["attempt"]


@admin.register(PriceEntry)
class PriceEntryAdmin(admin.ModelAdmin):
    """The price table (runs/prices.py): the form's clean refuses overlapping dates for one
    name, naming the field; a price change is a new row from its date, the old row ended."""

    list_display = [
        "pattern",
        "effective_from",
        "effective_to",
        "input_per_mtok",
        "cache_write_per_mtok",
        "cache_read_per_mtok",
        "output_per_mtok",
        "note",
    ]
    search_fields = ["pattern", "note"]
    list_filter = ["effective_to"]
    readonly_fields = ["currency", "updated_at"]
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}
