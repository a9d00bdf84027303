from django import forms
from django.contrib import admin
from django.db import models

from benchsite.accounts.access import can_write
from benchsite.accounts.models import Action, Door
from runs.admin_actions import cancel_runs, evaluate_runs, launch_runs, resume_runs, retry_runs
from runs.agent_clis import definition_add, definition_check
from runs.agents.cli.definition import DefinitionError
from runs.model_configs import UPSTREAM_FIELDS, model_config_save
from runs.models import (
    AgentCliDefinition,
    Attempt,
    AttemptFlag,
    AttemptStage,
    FailureReason,
    ModelConfig,
    Run,
)
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


class AgentCliDefinitionForm(forms.ModelForm):
    class Meta:
        model = AgentCliDefinition
        fields = ["text"]
        widgets = {"text": forms.Textarea(attrs={"rows": 30, "cols": 100})}

    def clean_text(self) -> str:
        text = self.cleaned_data["text"]
        try:
            definition_check(text)
        except DefinitionError as exc:
            raise forms.ValidationError([str(p) for p in exc.problems]) from None
        return text


@admin.register(AgentCliDefinition)
class AgentCliDefinitionAdmin(admin.ModelAdmin):
    """Added agent CLIs: checked as a shipped file (runs.agent_clis), never changed
    once added (an attempt's record names the definition it ran), removed only while no
    configuration names it."""

    form = AgentCliDefinitionForm
    list_display = ["name", "created_by", "created_at"]
    readonly_fields = ["name", "created_by", "created_at"]

    def has_change_permission(self, request, obj=None) -> bool:
        return obj is None and super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None) -> bool:
        if obj is not None and ModelConfig.objects.filter(cli_agent=obj.name).exists():
            return False
        return super().has_delete_permission(request, obj)

    def save_model(self, request, obj, form, change) -> None:
        # The form checked it; the service checks again, saves and audits.
        saved = definition_add(text=obj.text, actor=request.user, door=Door.ADMIN, request=request)
        obj.pk, obj.name = saved.pk, saved.name


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


class AttemptFlagInline(admin.TabularInline):
    """Integrity flags are computed (``ab flags recompute``), never edited by hand."""

    model = AttemptFlag
    extra = 0
    can_delete = False
    readonly_fields = ("rule", "rule_version", "detail", "created_at")
    fields = readonly_fields

    def has_add_permission(self, request, obj=None) -> bool:
        return False


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
        "integrity_rules",
    ]
    inlines = [AttemptStageInline, AttemptFlagInline]


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
