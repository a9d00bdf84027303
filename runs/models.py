"""Runs, attempts and the failure taxonomy table."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.urls import reverse
from django.utils.text import slugify

from runs import conditions
from runs.taxonomy import Category, Stage
from runs.usage_fields import (
    CostBasis,
    ShownUsage,
    UsageCostField,
    UsageCountField,
    UsageSecondsField,
    UsageTokensField,
)


class FailureReasonManager(models.Manager["FailureReason"]):
    def sync_from_taxonomy(self) -> None:
        """Make the table hold exactly the codes of runs.taxonomy (idempotent)."""
        from runs.taxonomy import REASONS

        for reason, info in REASONS.items():
            self.update_or_create(
                code=reason.value,
                defaults={
                    "description": info.description,
                    "typical_cause": info.typical_cause,
                    "precedence": info.precedence,
                    "category": info.category.value,
                },
            )


class FailureReason(models.Model):
    """The 15 codes of failure-taxonomy.md, filled by a data migration. Success is NULL."""

    code = models.CharField(max_length=40, primary_key=True)
    description = models.CharField(max_length=200)
    typical_cause = models.CharField(max_length=200)
    precedence = models.PositiveSmallIntegerField(unique=True)
    category = models.CharField(
        max_length=20, choices=[(c.value, c.value.title()) for c in Category]
    )

    objects = FailureReasonManager()

    class Meta:
        ordering = ["precedence"]

    def __str__(self) -> str:
        return self.code

    @property
    def is_infrastructure(self) -> bool:
        return self.category == Category.INFRASTRUCTURE


class AgentVariant(models.TextChoices):
    SCRIPTED = "scripted", "Scripted"
    ORACLE = "oracle", "Oracle (gold patch)"
    NOP = "nop", "No-op"
    # Baseline validation only (ab validate-suite, ab run-task): no agent stage.
    BASELINE = "baseline", "Baseline validation (no agent)"
    LLM = "llm", "LLM (OpenAI-compatible)"
    # An agent CLI (Claude Code, Codex CLI, mini-swe-agent...): ``ModelConfig.cli_agent`` names
    # its definition (runs/agents/cli/definitions/<name>.yaml).
    CLI = "cli", "Agent CLI"
    # Results produced elsewhere: imported predictions or published reports.
    EXTERNAL = "external", "External (imported)"
    # A class named by ``ModelConfig.agent_import_path`` (runs/agents/imported.py).
    IMPORT = "import", "Agent by import path"


class ModelConfig(models.Model):
    """What one leaderboard row stands for: an agent variant, a model and how it is called."""

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    name = models.CharField(max_length=200, unique=True)
    slug = models.SlugField(max_length=200, unique=True)
    description = models.TextField(blank=True)
    agent_variant = models.CharField(max_length=20, choices=AgentVariant.choices)
    model_name = models.CharField(max_length=200, blank=True)
    base_url = models.CharField(max_length=500, blank=True)
    # The name of the environment variable that holds the key: secrets never enter the database.
    api_key_env = models.CharField(max_length=100, blank=True)
    temperature = models.FloatField(null=True, blank=True)
    top_p = models.FloatField(null=True, blank=True)
    max_output_tokens = models.PositiveIntegerField(null=True, blank=True)
    seed = models.IntegerField(null=True, blank=True)
    extra_params = models.JSONField(default=dict, blank=True)
    max_steps = models.PositiveIntegerField(default=30)
    max_time_sec = models.PositiveIntegerField(default=1800)
    max_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    max_cost_usd = models.DecimalField(max_digits=10, decimal_places=4, null=True, blank=True)
    repeated_failure_threshold = models.PositiveSmallIntegerField(default=3)
    # Variant "cli": which agent CLI definition runs, and how many model calls its gateway
    # lets through (tokens, cost and wall time are the fields above).
    cli_agent = models.CharField(max_length=50, blank=True)
    max_model_calls = models.PositiveIntegerField(null=True, blank=True)
    # Variant "import": "package.module:ClassName", under settings.AGENT_IMPORT_PATHS. It runs
    # code in the worker, so only a superuser sets it (runs/model_configs.UPSTREAM_FIELDS).
    agent_import_path = models.CharField(max_length=300, blank=True)
    strict_patch = models.BooleanField(default=False)
    log_llm_messages = models.BooleanField(default=True)
    price_input_per_mtok = models.DecimalField(
        max_digits=10, decimal_places=4, null=True, blank=True
    )
    price_output_per_mtok = models.DecimalField(
        max_digits=10, decimal_places=4, null=True, blank=True
    )
    # The condition: files added to the workspace before the agent starts ({relative path:
    # text}; runs/conditions.py). Results reads defer it: ``condition`` names it for them.
    workspace_files = models.JSONField(default=dict, blank=True)
    condition = models.CharField(max_length=200, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def save(self, *args, **kwargs) -> None:
        fields = kwargs.get("update_fields")
        if fields is None or {"base_url", "api_key_env"} & set(fields):
            # Every ORM write, not only the forms': the CLI and the services save directly.
            self.clean_upstream()
        if self.agent_import_path and (fields is None or "agent_import_path" in set(fields)):
            self._check_import_path_listed()
        if not self.slug:
            self.slug = self._free_slug()
        if "workspace_files" in self.__dict__:  # not deferred: the label follows the files
            self.condition = conditions.condition_label(self.workspace_files or {})
            fields = kwargs.get("update_fields")
            if fields is not None and "workspace_files" in fields:
                kwargs["update_fields"] = {*fields, "condition"}
        super().save(*args, **kwargs)

    def clean(self) -> None:
        from django.core.exceptions import ValidationError

        try:
            self.workspace_files = conditions.clean_files(
                self.workspace_files,
                max_files=settings.CONDITION_FILES_MAX,
                max_file_bytes=settings.CONDITION_FILE_MAX_BYTES,
                max_total_bytes=settings.CONDITION_FILES_MAX_BYTES,
            )
        except conditions.ConditionError as exc:
            raise ValidationError({"workspace_files": exc.problems}) from None
        self.clean_upstream()
        if self.agent_variant == AgentVariant.CLI:
            self._clean_cli()
        if self.agent_variant == AgentVariant.IMPORT or self.agent_import_path:
            self._clean_import_path()
        if self.agent_variant in (AgentVariant.CLI, AgentVariant.LLM):
            self._clean_cost_price()

    def _clean_cost_price(self) -> None:
        """A cost budget needs a price for the model: an unpriced model costs $0 and the
        budget would never run out (the gateway refuses to start such a budget too)."""
        from django.core.exceptions import ValidationError

        from runs.agents.contract import ModelSettings
        from runs.prices import price_rows
        from runs.pricing import PriceTableError, price_for, price_table

        if self.max_cost_usd is None:
            return
        try:
            table = price_table(price_rows(), path=settings.LLM_PRICE_TABLE)
        except PriceTableError as exc:
            raise ValidationError({"max_cost_usd": f"LLM_PRICE_TABLE: {exc}"}) from None
        own = ModelSettings(
            variant=self.agent_variant,
            model_name=self.model_name,
            price_input_per_mtok=self.price_input_per_mtok,  # type: ignore[arg-type]
            price_output_per_mtok=self.price_output_per_mtok,  # type: ignore[arg-type]
        )
        if not self.model_name or price_for(own, table) is None:
            raise ValidationError(
                {
                    "max_cost_usd": f"a cost budget needs a price for the model "
                    f"{self.model_name!r}: set price_input_per_mtok and price_output_per_mtok, "
                    "or add the model to the price table (admin: Prices)"
                }
            )

    def clean_upstream(self) -> None:
        """Refuse a key variable or upstream the operator did not list (runs/upstreams.py),
        naming the field: the API, the admin and the CLI all come through here."""
        from django.core.exceptions import ValidationError

        from runs.upstreams import policy_from_settings

        problems = policy_from_settings().problems(
            base_url=self.base_url or "", api_key_env=self.api_key_env or ""
        )
        if problems:
            raise ValidationError(problems)

    def _clean_cli(self) -> None:
        from django.core.exceptions import ValidationError

        from runs.agents.cli.definition import DEFINITIONS_DIR

        known = sorted(
            {p.stem for p in DEFINITIONS_DIR.glob("*.yaml")}
            | set(AgentCliDefinition.objects.values_list("name", flat=True))
        )
        if self.cli_agent not in known:
            raise ValidationError(
                {"cli_agent": f"name an agent CLI definition: {', '.join(known)}"}
            )
        if not self.model_name:
            raise ValidationError({"model_name": "an agent CLI needs the model name to ask for"})

    def _check_import_path_listed(self) -> None:
        """On every write (the CLIs save without clean()): the path's form and the allow-list,
        which import nothing."""
        from django.core.exceptions import ValidationError

        from runs.agents.imported import ImportPathError, check_format

        try:
            check_format(self.agent_import_path, settings.AGENT_IMPORT_PATHS)
        except ImportPathError as exc:
            raise ValidationError({"agent_import_path": str(exc)}) from None

    def _clean_import_path(self) -> None:
        """Import the class now, so a bad path is refused with the field rather than found
        by the first attempt; only a listed module is ever imported."""
        from django.core.exceptions import ValidationError

        from runs.agents.imported import ImportPathError, resolve

        if self.agent_variant != AgentVariant.IMPORT:
            raise ValidationError({"agent_import_path": "only for the variant 'import'"})
        if not self.agent_import_path:
            raise ValidationError({"agent_import_path": "name the agent: package.module:Class"})
        try:
            resolve(self.agent_import_path, settings.AGENT_IMPORT_PATHS)
        except ImportPathError as exc:
            raise ValidationError({"agent_import_path": str(exc)}) from None

    def agent_key(self) -> str:
        """The same for two configurations that differ only in their condition."""
        return conditions.agent_key(
            {
                f.attname: getattr(self, f.attname)
                for f in self._meta.concrete_fields
                if f.attname not in conditions.NOT_THE_AGENT
            }
        )

    def _free_slug(self) -> str:
        # "Agent X" and "agent x" are different names with the same slug: number the later one.
        base = slugify(self.name.replace("/", "-"))[:190] or uuid.uuid4().hex[:12]
        taken = set(
            ModelConfig.objects.filter(slug__startswith=base)
            .exclude(pk=self.pk)
            .values_list("slug", flat=True)
        )
        candidate, n = base, 2
        while candidate in taken:
            candidate, n = f"{base}-{n}", n + 1
        return candidate

    def sampling_params(self) -> dict:
        params = {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_tokens": self.max_output_tokens,
            "seed": self.seed,
        }
        return {k: v for k, v in params.items() if v is not None} | dict(self.extra_params)


class AgentCliDefinition(models.Model):
    """An agent CLI definition added through the API or the admin (staff only), beside the
    shipped files of ``runs/agents/cli/definitions/``: its YAML text, checked exactly as a
    file is (``runs.agent_clis``), installed on first use like a shipped one."""

    name = models.CharField(max_length=41, unique=True)
    text = models.TextField(help_text="the definition's YAML, as a shipped file holds it")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        verbose_name = "agent CLI definition"

    def __str__(self) -> str:
        return self.name


class RunStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    FINISHED = "finished", "Finished"
    ABORTED = "aborted", "Aborted (fail-fast)"
    CANCELLED = "cancelled", "Cancelled"


RUN_FINAL_STATES = (RunStatus.FINISHED, RunStatus.ABORTED, RunStatus.CANCELLED)


class RunSource(models.TextChoices):
    HARNESS = "harness", "Run by this harness"
    PREDICTIONS = "predictions", "Evaluated predictions"
    PUBLISHED = "published", "Imported published results"
    VALIDATION = "validation", "Baseline validation"


class RunDateSource(models.TextChoices):
    """Where a run's date (``finished_at``) comes from. Imports read it from the folder when it
    says, else take ``--date``; ``UNKNOWN`` runs carry their import time, are shown as
    "imported on ..." and stay out of date filters and the over-time chart unless asked."""

    HARNESS = "harness", "this harness's clock"
    METADATA = "metadata", "the folder's metadata.yaml"
    INSPECT = "inspect", "the Inspect log's timestamps"
    TRAJECTORIES = "trajectories", "the trajectories' timestamps"
    FILENAME = "filename", "the date its file or folder is named with"
    GIVEN = "given", "--date, given on import"
    UNKNOWN = "unknown", "unknown (the import time)"


class RunQuerySet(models.QuerySet["Run"]):
    def active(self) -> RunQuerySet:
        return self.filter(status__in=[RunStatus.QUEUED, RunStatus.RUNNING])


class RunBackend(models.TextChoices):
    """Which sandbox a run's attempts use: the worker's default (``SANDBOX_BACKEND``), or one
    asked for at launch."""

    DEFAULT = "", "the worker's default"
    DOCKER = "docker", "Docker"
    BWRAP = "bwrap", "bubblewrap"


class Run(models.Model):
    """A batch: selected tasks of a suite x one model configuration x k samples."""

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    suite = models.ForeignKey("tasks_app.Suite", on_delete=models.CASCADE, related_name="runs")
    model_config = models.ForeignKey(ModelConfig, on_delete=models.PROTECT, related_name="runs")
    samples = models.PositiveSmallIntegerField(default=1)
    selection = models.JSONField(default=dict, blank=True)
    backend = models.CharField(max_length=10, choices=RunBackend.choices, blank=True, default="")
    source = models.CharField(max_length=20, choices=RunSource.choices, default=RunSource.HARNESS)
    status = models.CharField(max_length=20, choices=RunStatus.choices, default=RunStatus.QUEUED)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    fail_fast_reason = models.TextField(blank=True)
    fail_fast_code = models.CharField(max_length=40, blank=True)
    fail_fast_permanent = models.BooleanField(default=False)
    # Cached counts for list pages; the attempts are the truth (runs.services recomputes).
    totals = models.JSONField(default=dict, blank=True)
    # Enough to reproduce the run.
    harness_version = models.CharField(max_length=30, blank=True)
    git_revision = models.CharField(max_length=64, blank=True)
    package_versions = models.JSONField(default=dict, blank=True)
    config_snapshot = models.JSONField(default=dict, blank=True)
    artifacts_dir = models.CharField(max_length=500, blank=True)
    notes = models.TextField(blank=True)
    # Provenance of an imported run: its date's source, what was imported, when and by whom.
    date_source = models.CharField(
        max_length=20, choices=RunDateSource.choices, default=RunDateSource.HARNESS
    )
    source_path = models.CharField(max_length=1000, blank=True)
    imported_at = models.DateTimeField(null=True, blank=True)
    imported_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )

    objects = RunQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            # The reaper and fail-fast propagation look for active runs of one model config.
            models.Index(fields=["model_config", "status"], name="run_model_status_idx"),
            models.Index(fields=["suite", "created_at"], name="run_suite_created_idx"),
        ]

    def __str__(self) -> str:
        return f"run {str(self.public_id)[:8]} {self.suite.name} x {self.model_config.name}"

    def get_absolute_url(self) -> str:
        return reverse("run-detail", args=[self.public_id])

    @property
    def is_final(self) -> bool:
        return self.status in RUN_FINAL_STATES

    @property
    def date_known(self) -> bool:
        """False for an imported run whose source said nothing of when it ran."""
        return self.date_source != RunDateSource.UNKNOWN


class AttemptStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    FINISHED = "finished", "Finished"
    SKIPPED = "skipped", "Skipped"
    CANCELLED = "cancelled", "Cancelled"
    # Imported with a patch but no evaluation asked for: no worker claims it and the reaper
    # never re-sends it (both look for QUEUED only) until ``run_evaluate`` queues it. Neither
    # final nor failed: it has no outcome yet.
    NOT_EVALUATED = "not_evaluated", "Not evaluated"
    # Imported results with no entry for the instance (or predictions without one): the
    # system never attempted it. Final, but no outcome of the agent's: no failure reason, no
    # grade, no usage. Counted as 0 in the whole-suite rate, left out of the attempted rate,
    # the failure taxonomy and the paired tests (runs.results.scoring).
    MISSING = "missing", "Not attempted"


FINAL_STATES = (
    AttemptStatus.FINISHED,
    AttemptStatus.SKIPPED,
    AttemptStatus.CANCELLED,
    AttemptStatus.MISSING,
)


class Grade(models.TextChoices):
    FULL = "FULL", "Full"
    PARTIAL = "PARTIAL", "Partial"
    NO = "NO", "No"


class AttemptQuerySet(models.QuerySet["Attempt"]):
    def final(self) -> AttemptQuerySet:
        return self.filter(status__in=FINAL_STATES)

    def finished(self) -> AttemptQuerySet:
        return self.filter(status=AttemptStatus.FINISHED)

    def scored(self) -> AttemptQuerySet:
        """Finished attempts that count toward success rates (infrastructure excluded)."""
        return self.filter(status=AttemptStatus.FINISHED, is_infra=False)

    def resolved(self) -> AttemptQuerySet:
        return self.filter(status=AttemptStatus.FINISHED, failure_reason__isnull=True)

    def infrastructure(self) -> AttemptQuerySet:
        return self.filter(status=AttemptStatus.FINISHED, is_infra=True)

    def for_suite(self, suite) -> AttemptQuerySet:
        return self.filter(suite=suite)

    def for_model(self, model_config) -> AttemptQuerySet:
        return self.filter(model_config=model_config)


class Attempt(models.Model):
    """One task x one sample index in a run. Every attempt ends in a final state."""

    SCHEMA_VERSION = "1.0.0"

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="attempts")
    task = models.ForeignKey("tasks_app.Task", on_delete=models.CASCADE, related_name="attempts")
    # Copies of run.suite and run.model_config: leaderboards aggregate tens of thousands of
    # attempts by suite x model, and this keeps that a single indexed scan with no joins.
    suite = models.ForeignKey("tasks_app.Suite", on_delete=models.CASCADE, related_name="+")
    model_config = models.ForeignKey(ModelConfig, on_delete=models.PROTECT, related_name="+")
    sample_index = models.PositiveSmallIntegerField(default=0)
    task_revision = models.PositiveIntegerField(default=1)

    status = models.CharField(
        max_length=20, choices=AttemptStatus.choices, default=AttemptStatus.QUEUED
    )
    failure_reason = models.ForeignKey(
        FailureReason, null=True, blank=True, on_delete=models.PROTECT, related_name="attempts"
    )
    failure_stage = models.CharField(
        max_length=20, blank=True, choices=[(s.value, s.value) for s in Stage]
    )
    is_infra = models.BooleanField(default=False)
    is_timeout = models.BooleanField(default=False)
    is_empty_run = models.BooleanField(default=False)

    exit_code = models.IntegerField(null=True, blank=True)
    # Usage: NULL when unknown (an imported report without a trajectory, a missing instance),
    # shown as "—", never as zero. A stored value outside its range reads as unknown too
    # (runs/usage_fields.py: older imports and raw SQL left 1e308 and infinities).
    duration_sec = UsageSecondsField(null=True, blank=True)
    tokens_in = UsageTokensField(default=0, null=True, blank=True)
    tokens_out = UsageTokensField(default=0, null=True, blank=True)
    cost_usd = UsageCostField(max_digits=12, decimal_places=6, default=0, null=True, blank=True)
    tool_calls = UsageCountField(default=0, null=True, blank=True)
    steps = UsageCountField(default=0, null=True, blank=True)
    # Cost as the provider bills it (runs/pricing.py): the input tokens written to and read
    # from the prompt cache (within tokens_in), the cost of each class, and where the cost
    # comes from (``CostBasis``; unknown: ``cost_usd`` NULL and ``cost_note`` says why). NULL
    # where nothing broke the usage down (an older attempt, an import).
    tokens_cache_write = UsageTokensField(null=True, blank=True)
    tokens_cache_read = UsageTokensField(null=True, blank=True)
    cost_input_usd = UsageCostField(max_digits=12, decimal_places=6, null=True, blank=True)
    cost_cache_write_usd = UsageCostField(max_digits=12, decimal_places=6, null=True, blank=True)
    cost_cache_read_usd = UsageCostField(max_digits=12, decimal_places=6, null=True, blank=True)
    cost_output_usd = UsageCostField(max_digits=12, decimal_places=6, null=True, blank=True)
    cost_basis = models.CharField(max_length=10, choices=CostBasis.choices, blank=True)
    cost_note = models.CharField(max_length=300, blank=True)
    lines_changed = models.PositiveIntegerField(default=0)
    files_touched = models.JSONField(default=list, blank=True)
    final_patch = models.TextField(blank=True)
    error_text = models.TextField(blank=True)
    error_fingerprint = models.CharField(max_length=200, blank=True)
    # "permanent" (auth, unknown model, bad parameter, misconfiguration) or "transient";
    # run-level fail-fast stops every run of the model configuration on a permanent one.
    error_kind = models.CharField(max_length=20, blank=True)
    stderr_tail = models.TextField(blank=True)
    # An agent CLI's process: how it ended (the signal when one killed it).
    agent_exit_code = models.IntegerField(null=True, blank=True)
    agent_signal = models.PositiveSmallIntegerField(null=True, blank=True)
    artifacts_dir = models.CharField(max_length=500, blank=True)
    schema_version = models.CharField(max_length=20, default=SCHEMA_VERSION)
    # SWE-bench style grading: per-test statuses of FAIL_TO_PASS / PASS_TO_PASS and the grade.
    test_results = models.JSONField(default=dict, blank=True)
    grade = models.CharField(max_length=10, blank=True, choices=Grade.choices)
    # The image the attempt ran on: the repository digest pulled (or the image ID of one
    # loaded or built here), so a tag moved later still says what ran.
    image_digest = models.CharField(max_length=400, blank=True)
    # The integrity rules its flags were last computed under ("name:version,...", sorted;
    # runs.integrity): ``ab flags recompute`` redoes the attempts where it differs.
    integrity_rules = models.CharField(max_length=500, blank=True)

    # Worker bookkeeping.
    celery_task_id = models.CharField(max_length=100, blank=True)
    worker = models.CharField(max_length=200, blank=True)
    requeue_count = models.PositiveSmallIntegerField(default=0)
    queued_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = AttemptQuerySet.as_manager()

    class Meta:
        ordering = ["run", "task__task_id", "sample_index"]
        # Given by the "readers" group (benchsite.accounts.access): logs, patches and
        # trajectories can hold secrets of a task's repository, so signing in alone does not
        # show them.
        permissions = [("read_artifacts", "Can read patches, logs and trajectories")]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "task", "sample_index"], name="attempt_unique_sample"
            ),
            models.CheckConstraint(
                condition=~Q(status="finished") | Q(finished_at__isnull=False),
                name="attempt_finished_has_time",
            ),
        ]
        indexes = [
            # Workers, fail-fast and the run page count attempts of a run by status.
            models.Index(fields=["run", "status"], name="attempt_run_status_idx"),
            # The reaper scans running attempts by heartbeat age.
            models.Index(fields=["status", "heartbeat_at"], name="attempt_status_hb_idx"),
            # Leaderboard, compare and taxonomy pages aggregate by suite x model.
            models.Index(
                fields=["suite", "model_config", "status"], name="attempt_suite_model_idx"
            ),
            # Task pages list every attempt on a task.
            models.Index(fields=["task", "model_config"], name="attempt_task_model_idx"),
            # Fail-fast groups failures by fingerprint.
            models.Index(fields=["run", "error_fingerprint"], name="attempt_run_fp_idx"),
            # Covering index for the results pages (runs.results.leaderboard, runs.results.compare,
            # runs.results.taxonomy_report): their grouped reads touch only these columns, so the
            # database answers from the index without reading the wide attempt rows (patches,
            # logs); 45,000 attempts aggregate in tens of milliseconds on SQLite.
            models.Index(
                fields=[
                    "suite",
                    "status",
                    "model_config",
                    "task",
                    "is_infra",
                    "failure_reason",
                    "sample_index",
                    "run",
                    "finished_at",
                    "cost_usd",
                    "tokens_in",
                    "tokens_out",
                    "steps",
                    "duration_sec",
                ],
                name="attempt_results_cover_idx",
            ),
            # Covering index for runs.results.selection.read_results, which every results surface
            # scores from: attempts of every status grouped by run x task. In this order the
            # database groups while it scans, without sorting 45,000 rows first; the usage
            # columns (cost, tokens, steps = model API calls, wall time) let the leaderboard's
            # per-run sums read the index alone too.
            models.Index(
                fields=[
                    "suite",
                    "run",
                    "task",
                    "status",
                    "is_infra",
                    "failure_reason",
                    "cost_usd",
                    "tokens_in",
                    "tokens_out",
                    "steps",
                    "duration_sec",
                ],
                name="attempt_run_results_idx",
            ),
            # The taxonomy's counts by model x failure reason: in this order the database counts
            # while it scans the finished attempts, without sorting 45,000 rows (11 of the
            # query's 13 ms at that size).
            models.Index(
                fields=["suite", "status", "model_config", "failure_reason"],
                name="attempt_reason_counts_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"attempt {str(self.public_id)[:8]} {self.task.task_id}#{self.sample_index}"

    def get_absolute_url(self) -> str:
        return reverse("attempt-detail", args=[self.public_id])

    @property
    def is_final(self) -> bool:
        return self.status in FINAL_STATES

    @property
    def resolved(self) -> bool:
        return self.status == AttemptStatus.FINISHED and self.failure_reason_id is None

    @property
    def usage_recorded(self) -> bool:
        """Whether cost, tokens and calls are figures. A queued or running attempt's zeros are
        no cost yet ("—", null), unless it carries usage from before (an imported run's
        attempt queued for evaluation keeps what its trajectory reported); a stub that was
        never attempted has none."""
        if self.status == AttemptStatus.MISSING:
            return False
        if self.status in (AttemptStatus.QUEUED, AttemptStatus.RUNNING):
            return bool(self.cost_usd or self.tokens_in or self.tokens_out)
        return True

    @property
    def usage(self) -> ShownUsage:
        """The usage every surface shows: figures, or None where ``usage_recorded`` is not."""
        return ShownUsage.of(self)

    @property
    def is_missing(self) -> bool:
        """Never attempted (imported results without an entry for the instance)."""
        return self.status == AttemptStatus.MISSING

    @property
    def tokens(self) -> int | None:
        """Tokens in and out; None ("—") when nothing recorded them."""
        if self.tokens_in is None and self.tokens_out is None:
            return None
        return (self.tokens_in or 0) + (self.tokens_out or 0)

    @property
    def outcome(self) -> str:
        """How this attempt counts in scores (``runs.results.scoring.attempt_outcome``)."""
        from runs.results.scoring import attempt_outcome

        return attempt_outcome(
            self.status, is_infra=self.is_infra, resolved=self.failure_reason_id is None
        )

    @property
    def is_stale_revision(self) -> bool:
        """Scored against an older version of the task than the one stored now."""
        return self.task_revision < self.task.revision


class AttemptStage(models.Model):
    """One stage of an attempt: its command, exit code, duration and output location."""

    attempt = models.ForeignKey(Attempt, on_delete=models.CASCADE, related_name="stages")
    name = models.CharField(max_length=40)
    order = models.PositiveSmallIntegerField(default=0)
    command = models.TextField(blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    duration_sec = models.FloatField(null=True, blank=True)
    timed_out = models.BooleanField(default=False)
    output_truncated = models.BooleanField(default=False)
    # Relative to the attempt's artifacts_dir, e.g. "logs/setup.txt".
    output_path = models.CharField(max_length=300, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["attempt", "order"]

    def __str__(self) -> str:
        return f"{self.name} (exit {self.exit_code})"


class Lease(models.Model):
    """Who runs a periodic job of the deployment now: the reaper's pass is one holder's at a
    time (``runs.workers.reaper``), so every ``ab worker`` can offer to run it and several do
    not repeat each other's work. A holder renews its lease each pass; once ``expires_at``
    passes (its process died), another takes it over. No page shows it: the page cache's
    triggers leave this table alone (``runs.data_version``)."""

    name = models.CharField(max_length=200, unique=True)
    holder = models.CharField(max_length=200, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.name}: {self.holder or '-'} until {self.expires_at}"


class RunTally(models.Model):
    """One run's aggregates (``kind``: its per-task tallies, its usage sums) as computed from
    its attempts under the run's stamp ``stamp`` (``runs.data_version``): the second tier of
    ``runs.results.run_tallies``, which outlives the web process. Never used once the run's
    stamp moves on; no page shows it, so the page cache's triggers leave this table alone."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=20)
    stamp = models.BigIntegerField()
    payload = models.BinaryField()  # runs.results.tally_store's encoding

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "kind"], name="run_tally_kind")]

    def __str__(self) -> str:
        return f"{self.kind} of run {self.run_id} at stamp {self.stamp}"


class AttemptFlag(models.Model):
    """An integrity rule that fired on an attempt (``runs.integrity.rules``): computed from
    what the harness observed, never from what the agent says. A flag does not change the
    attempt's outcome; the leaderboard counts flagged successes and can count them out."""

    attempt = models.ForeignKey(Attempt, on_delete=models.CASCADE, related_name="flags")
    rule = models.CharField(max_length=40)
    rule_version = models.PositiveSmallIntegerField()
    detail = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["attempt", "rule"]
        constraints = [
            models.UniqueConstraint(fields=["attempt", "rule"], name="attempt_flag_unique_rule")
        ]

    def __str__(self) -> str:
        return f"{self.rule} v{self.rule_version} on attempt {self.attempt_id}"


# Models of their own modules (the search index, runs/search/models.py; the price table,
# runs/prices.py), imported here so Django registers them with this app.
from runs.prices import PriceEntry  # noqa: E402, F401
from runs.search.models import TranscriptDocument  # noqa: E402, F401
