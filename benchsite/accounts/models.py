"""Access control: per-user API tokens and the audit log of writes."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models


class ApiTokenQuerySet(models.QuerySet["ApiToken"]):
    def active(self) -> ApiTokenQuerySet:
        return self.filter(revoked_at__isnull=True)

    def for_user(self, user) -> ApiTokenQuerySet:
        return self.filter(user=user)


class ApiToken(models.Model):
    """A bearer token for the REST API. Only its prefix and SHA-256 digest are stored.

    The full token is shown once, when it is created; the prefix (which is part of the token)
    finds the row, and the digest proves the rest.
    """

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100)
    # Every request looks its token up by prefix: unique, hence indexed.
    prefix = models.CharField(max_length=16, unique=True, editable=False)
    token_hash = models.CharField(max_length=64, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.name})"

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None


class Action(models.TextChoices):
    """Every write a person can ask for, and the audit log's name for it: one list for the
    rights (``benchsite.accounts.access.RIGHTS``) and the log. The values are what the log
    stores; changing one needs a data migration of the stored rows."""

    RUN_LAUNCH = "run.launch", "Launched a run"
    RUN_CANCEL = "run.cancel", "Cancelled a run"
    RUN_RETRY = "run.retry", "Retried a run's infrastructure failures"
    RUN_RESUME = "run.resume", "Re-sent a run's queued attempts"
    RUN_EVALUATE = "run.evaluate", "Queued a run's not-evaluated attempts"
    MODEL_CONFIG_CREATE = "model_config.create", "Created a model configuration"
    # Setting or changing where a configuration sends the worker's key (base_url) and which
    # key (api_key_env): on top of the create/change right, whatever the door.
    MODEL_CONFIG_UPSTREAM = "model_config.upstream", "Set a model configuration's upstream"
    TASKS_IMPORT = "tasks.import", "Imported tasks"
    SWEBENCH_IMPORT = "swebench.import", "Imported a SWE-bench dataset"
    PREDICTIONS_IMPORT = "predictions.import", "Imported predictions"
    RESULTS_IMPORT = "results.import", "Imported published results"
    RUN_IMPORT = "run.import", "Imported a run folder"
    # A CLI definition runs in every sandbox of the configurations naming it: staff only.
    AGENT_CLI_ADD = "agent_cli.add", "Added an agent CLI definition"
    TOKEN_CREATE = "token.create", "Created an API token"
    TOKEN_REVOKE = "token.revoke", "Revoked an API token"
    # Not a write: a refused one, kept so refusals can be reviewed (no right of its own).
    ACCESS_DENIED = "access.denied", "Was refused a write"


class Door(models.TextChoices):
    """Which way a write came in. The CLI has no account: its events name the OS user."""

    API = "api", "REST API"
    PAGE = "page", "Site page"
    ADMIN = "admin", "Staff admin"
    CLI = "cli", "ab command"


class AuditEvent(models.Model):
    """Who did what to which objects, when, from where. Append-only."""

    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="audit_events",
    )
    # Kept as text too, so the record still names the actor after the user is deleted.
    actor_name = models.CharField(max_length=150, blank=True)
    token = models.ForeignKey(
        ApiToken, null=True, blank=True, on_delete=models.SET_NULL, related_name="audit_events"
    )
    action = models.CharField(max_length=40, choices=Action.choices)
    # Which door the write came through (the column keeps its first name: stored rows stay).
    via = models.CharField(max_length=10, choices=Door.choices, default=Door.API)
    object_type = models.CharField(max_length=40, blank=True)
    object_ids = models.JSONField(default=list, blank=True)
    details = models.JSONField(default=dict, blank=True)
    ip = models.GenericIPAddressField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            # The admin list and "what did this user do" filter by actor, newest first.
            models.Index(fields=["actor", "created_at"], name="audit_actor_created_idx"),
            models.Index(fields=["action", "created_at"], name="audit_action_created_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M} {self.actor_name or '-'} {self.action}"
