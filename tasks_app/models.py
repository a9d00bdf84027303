"""Suites and tasks: what an agent is asked to do, stored as loaded."""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import Q
from django.urls import reverse


class TaskSource(models.TextChoices):
    TASK_YAML = "task_yaml", "task.yaml"
    SWEBENCH = "swebench", "SWE-bench dataset"
    HARBOR = "harbor", "Harbor task folder"


class SuiteQuerySet(models.QuerySet["Suite"]):
    def with_task_counts(self) -> SuiteQuerySet:
        return self.annotate(task_count=models.Count("tasks", distinct=True))


class Suite(models.Model):
    name = models.SlugField(max_length=100, unique=True)
    description = models.TextField(blank=True)
    source = models.CharField(
        max_length=20, choices=TaskSource.choices, default=TaskSource.TASK_YAML
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = SuiteQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("suite-detail", args=[self.name])


class TaskQuerySet(models.QuerySet["Task"]):
    def for_suite(self, suite: Suite | str) -> TaskQuerySet:
        if isinstance(suite, Suite):
            return self.filter(suite=suite)
        return self.filter(suite__name=suite)

    def with_label(self, label: str) -> TaskQuerySet:
        return self.filter(labels_text__contains=f",{label},")

    def without_label(self, label: str) -> TaskQuerySet:
        return self.exclude(labels_text__contains=f",{label},")


class Task(models.Model):
    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    suite = models.ForeignKey(Suite, on_delete=models.CASCADE, related_name="tasks")
    task_id = models.CharField(max_length=200)
    source = models.CharField(
        max_length=20, choices=TaskSource.choices, default=TaskSource.TASK_YAML
    )
    # The whole spec as loaded (task.yaml mapping, or the full SWE-bench row), plus where from.
    spec = models.JSONField(default=dict)
    spec_path = models.CharField(max_length=500, blank=True)
    spec_hash = models.CharField(max_length=64, blank=True)
    revision = models.PositiveIntegerField(default=1)
    dataset_version = models.CharField(max_length=100, blank=True)

    repo_url = models.CharField(max_length=500)
    repo_commit = models.CharField(max_length=100, blank=True)
    docker_image = models.CharField(max_length=300, blank=True)
    workdir = models.CharField(max_length=300, default="/workspace/repo")
    timeout_sec = models.PositiveIntegerField(default=300)
    setup_commands = models.JSONField(default=list, blank=True)
    setup_network = models.BooleanField(default=True)
    test_command = models.TextField()
    labels = models.JSONField(default=list, blank=True)
    # ",a,b," so that a label filter is an indexed-friendly substring match on every database.
    labels_text = models.CharField(max_length=500, blank=True, default="", editable=False)
    max_steps = models.PositiveIntegerField(null=True, blank=True)
    harness_min_version = models.CharField(max_length=30, blank=True)

    # SWE-bench fields (empty for task.yaml tasks unless they ship a reference solution).
    problem_statement = models.TextField(blank=True)
    hints_text = models.TextField(blank=True)
    gold_patch = models.TextField(blank=True)
    test_patch = models.TextField(blank=True)
    fail_to_pass = models.JSONField(default=list, blank=True)
    pass_to_pass = models.JSONField(default=list, blank=True)
    environment_setup_commit = models.CharField(max_length=100, blank=True)
    instance_version = models.CharField(max_length=30, blank=True)
    difficulty = models.CharField(max_length=50, blank=True)
    # SWE-bench: the Python its specification asks for and the one its environment is built
    # with here (they differ for an approximate environment), known at import
    # (``sandbox.environments.envspec.approximate_pythons``) and stored so that pages read them
    # without importing the official harness (seconds of CPU in a request, issue 29).
    python_asked = models.CharField(max_length=10, blank=True)
    python_used = models.CharField(max_length=10, blank=True)
    # The image of ``docker_image`` as last pulled on this machine (tasks_app/images.py):
    # the repository digest the registry served, the reference pulled (a mirror's when
    # REGISTRY_MIRRORS maps its registry) and when; ``image_status`` is the pull under way
    # (layers, bytes, estimate) or how the last one ended ("" when nothing was pulled).
    image_digest = models.CharField(max_length=400, blank=True)
    image_source = models.CharField(max_length=400, blank=True)
    image_pulled_at = models.DateTimeField(null=True, blank=True)
    image_status = models.CharField(max_length=500, blank=True)
    # The pull as numbers, for the task page's live view (its JSON endpoint): state (pulling,
    # done, failed), layers and layers_done, bytes_done of bytes_total, eta_sec, status, line;
    # written with image_status (at most once a second) and at the end.
    image_progress = models.JSONField(default=dict, blank=True)

    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = TaskQuerySet.as_manager()

    class Meta:
        ordering = ["suite__name", "task_id"]
        constraints = [
            models.UniqueConstraint(fields=["suite", "task_id"], name="task_unique_in_suite"),
        ]

    def __str__(self) -> str:
        return f"{self.suite.name}/{self.task_id}"

    def save(self, *args, **kwargs) -> None:
        self.labels_text = "," + ",".join(self.labels or []) + "," if self.labels else ""
        update_fields = kwargs.get("update_fields")
        if update_fields is not None and "labels" in update_fields:
            kwargs["update_fields"] = {*update_fields, "labels_text"}
        super().save(*args, **kwargs)

    def get_absolute_url(self) -> str:
        return reverse("task-detail", args=[self.suite.name, self.task_id])

    @property
    def approximate_environment(self) -> bool:
        return bool(self.python_asked) and self.python_asked != self.python_used

    @property
    def is_flaky(self) -> bool:
        return "flaky" in (self.labels or [])


class TaskRevision(models.Model):
    """What a re-import changed. Attempts record the revision they were scored against."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="revisions")
    revision = models.PositiveIntegerField()
    spec_hash = models.CharField(max_length=64)
    changed_fields = models.JSONField(default=list)
    previous_values = models.JSONField(default=dict)
    source_file = models.CharField(max_length=500, blank=True)
    dataset_version = models.CharField(max_length=100, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["task", "revision"]
        constraints = [
            models.UniqueConstraint(fields=["task", "revision"], name="task_revision_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.task} r{self.revision}"


class GoldValidationStatus(models.TextChoices):
    VALID = "valid", "valid (gold FULL, empty NO)"
    INVALID = "invalid", "invalid"
    NOT_BUILDABLE = "not_buildable", "not buildable here"


class GoldValidation(models.Model):
    """The last gold validation of a SWE-bench task on one sandbox backend
    (``ab validate-suite SUITE --variant oracle``): the gold patch must grade FULL and no
    patch must grade NO. An invalid task is left out of leaderboard rates."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="gold_validations")
    backend = models.CharField(max_length=20)
    status = models.CharField(max_length=20, choices=GoldValidationStatus.choices)
    gold_grade = models.CharField(max_length=20, blank=True)
    empty_grade = models.CharField(max_length=20, blank=True)
    # Tests that went the wrong way: FAIL_TO_PASS/PASS_TO_PASS failing with the gold patch,
    # FAIL_TO_PASS passing with no patch.
    failing_tests = models.JSONField(default=list, blank=True)
    reason = models.TextField(blank=True)
    validated_at = models.DateTimeField(auto_now=True)
    # The environment validated: the Python the specification asks for and the one used (they
    # differ for an approximate environment), and the dates its installs resolved as of.
    python_asked = models.CharField(max_length=10, blank=True)
    python_used = models.CharField(max_length=10, blank=True)
    installs_as_of = models.CharField(max_length=80, blank=True)

    class Meta:
        ordering = ["task", "backend"]
        constraints = [
            models.UniqueConstraint(
                fields=["task", "backend"], name="gold_validation_unique_backend"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.task} on {self.backend}: {self.status}"

    @property
    def approximate(self) -> bool:
        return bool(self.python_asked) and self.python_asked != self.python_used


def invalid_task_ids(suite: Suite) -> list[int]:
    """Tasks of ``suite`` whose last gold validation (on any backend) found them invalid, and
    approximate environments it found not buildable (the gold patch fails on them): an
    approximate instance counts only where gold validation passes on it. An instance not yet
    validated counts, exact or approximate, as published results are rated over the suite."""
    return list(
        GoldValidation.objects.filter(task__suite=suite)
        .filter(
            Q(status=GoldValidationStatus.INVALID)
            | Q(status=GoldValidationStatus.NOT_BUILDABLE, gold_grade__gt="")
        )
        .values_list("task_id", flat=True)
        .distinct()
    )
