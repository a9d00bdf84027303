from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict, cast

from django.contrib import admin

from tasks_app.models import GoldValidation, Suite, SuiteQuerySet, Task, TaskRevision

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations


class _TaskCount(TypedDict):
    task_count: int


@admin.register(Suite)
class SuiteAdmin(admin.ModelAdmin):
    list_display = ["name", "source", "task_count", "updated_at"]
    list_filter = ["source"]
    search_fields = ["name", "description"]
    # Adds the SWE-bench upload pages (tasks_app.swebench.dataset_admin, runs.imports.admin) to
    # the object tools.
    change_list_template = "admin/swebench/suite_change_list.html"

    def get_queryset(self, request):
        return cast(SuiteQuerySet, super().get_queryset(request)).with_task_counts()

    @admin.display(ordering="task_count")
    def task_count(self, obj: WithAnnotations[Suite, _TaskCount]) -> int:
        return obj.task_count


class TaskRevisionInline(admin.TabularInline):
    model = TaskRevision
    extra = 0
    can_delete = False
    # A tuple: one value fits both attributes' types in django-stubs (a list fits only one).
    readonly_fields = ("revision", "changed_fields", "source_file", "dataset_version", "created_at")
    fields = readonly_fields


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):
    list_display = ["task_id", "suite", "source", "revision", "labels", "docker_image"]
    list_filter = ["suite", "source", "dataset_version"]
    list_select_related = ["suite"]
    search_fields = ["task_id", "repo_url", "labels_text", "problem_statement"]
    readonly_fields = ["public_id", "spec_hash", "revision", "created_at", "updated_at"]
    inlines = [TaskRevisionInline]


@admin.register(TaskRevision)
class TaskRevisionAdmin(admin.ModelAdmin):
    list_display = ["task", "revision", "dataset_version", "created_at"]
    list_filter = ["task__suite", "dataset_version"]
    list_select_related = ["task__suite"]
    search_fields = ["task__task_id"]


@admin.register(GoldValidation)
class GoldValidationAdmin(admin.ModelAdmin):
    """Written by ``ab validate-suite SUITE --variant oracle``; read-only here."""

    list_display = ["task", "backend", "status", "gold_grade", "empty_grade", "validated_at"]
    list_filter = ["status", "backend", "task__suite"]
    search_fields = ["task__task_id", "reason"]
    readonly_fields = [f.name for f in GoldValidation._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False
