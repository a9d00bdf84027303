"""Writes and look-ups for model configurations, shared by the API and the pages."""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

from django.db import transaction
from django.utils.text import slugify

from benchsite.accounts.models import Action, Door
from benchsite.accounts.services import audit_event_record
from runs.models import ModelConfig


def model_config_by_ref(ref: str) -> ModelConfig | None:
    """A model configuration by name, slug or public id (in that order), or None."""
    ref = ref.strip()
    found = (
        ModelConfig.objects.filter(name=ref).first() or ModelConfig.objects.filter(slug=ref).first()
    )
    if found is None:
        try:
            found = ModelConfig.objects.filter(public_id=uuid.UUID(ref)).first()
        except ValueError:
            return None
    return found


def slug_taken_by_other(name: str) -> ModelConfig | None:
    """Another configuration whose slug ``name`` would get (ModelConfig.save derives it).

    Services that create configurations by name through ``save()`` (imports of external
    results) would hit the unique slug; callers check first to answer with the field.
    """
    name = name.strip()
    base = slugify(name.replace("/", "-"))[:200]
    if not base:
        return None
    return ModelConfig.objects.filter(slug=base).exclude(name=name).first()


def _free_slug(name: str) -> str:
    base = slugify(name.replace("/", "-"))[:190] or uuid.uuid4().hex[:12]
    slug, n = base, 2
    while ModelConfig.objects.filter(slug=slug).exists():
        slug, n = f"{base}-{n}", n + 1
    return slug


def model_config_create(*, fields: dict[str, Any], actor, door: Door, request=None) -> ModelConfig:
    """Create a model configuration from column values, validated like the admin form does.

    Raises django's ValidationError naming each bad field (a taken name, an out-of-range
    number, a key variable or upstream the operator did not list). Two names that slugify
    alike get distinct slugs ("gpt-4", "gpt-4-2"). Setting ``base_url`` or ``api_key_env``
    needs a superuser (``PermissionDenied`` otherwise). Audited: the creation, and the
    upstream it sets.
    """
    config = ModelConfig(**fields)
    # The right first: a refused upstream is a 403 whatever else the request gets wrong.
    upstream_require(actor, upstream_changes(config, before=None), request=request, door=door)
    config.slug = _free_slug(config.name)
    config.full_clean()
    return model_config_save(config=config, before=None, actor=actor, door=door, request=request)


def model_config_save(
    *, config: ModelConfig, before: ModelConfig | None, actor, door: Door, request=None
) -> ModelConfig:
    """Save a new (``before`` None) or changed configuration, validated by the caller (the
    admin's form, ``model_config_create``): checks the upstream right, records the creation
    and the upstream change in the same transaction."""
    changes = upstream_changes(config, before=before)
    upstream_require(actor, changes, request=request, door=door)
    with transaction.atomic():
        config.save()
        if before is None:
            audit_event_record(
                actor=actor,
                action=Action.MODEL_CONFIG_CREATE,
                door=door,
                objects=[config],
                request=request,
                details={"name": config.name, "agent_variant": config.agent_variant},
            )
        upstream_audit(actor, config, changes, request=request, door=door)
    return config


# --- Where the key goes: superusers only, audited ---------------------------------------------

# An agent import path is here too: it makes the worker run that module's code.
UPSTREAM_FIELDS = ("base_url", "api_key_env", "agent_import_path")


def upstream_changes(config: ModelConfig, *, before: ModelConfig | None) -> dict[str, list[str]]:
    """``{field: [old, new]}`` for the upstream fields a write sets (a new configuration's
    non-empty ones) or changes (an existing one's)."""
    changes = {}
    for name in UPSTREAM_FIELDS:
        old = getattr(before, name) if before is not None else ""
        new = getattr(config, name)
        if (old or "") != (new or ""):
            changes[name] = [old or "", new or ""]
    return changes


def upstream_require(user, changes: dict, *, door: Door, request=None) -> None:
    """Raise ``PermissionDenied`` (audited) unless ``user`` may make these upstream changes."""
    from benchsite.accounts.access import require_write

    if changes:
        require_write(user, Action.MODEL_CONFIG_UPSTREAM, request=request, door=door)


def upstream_audit(actor, config: ModelConfig, changes: dict, *, door: Door, request=None) -> None:
    """One ``model_config.upstream`` audit event naming the old and new values (a variable's
    name and a URL: never a key)."""
    if changes:
        audit_event_record(
            actor=actor,
            action=Action.MODEL_CONFIG_UPSTREAM,
            door=door,
            objects=[config],
            request=request,
            details={"name": config.name, **changes},
        )


def endpoint_tag(base_url: str) -> str:
    """A short, stable tag of an endpoint for a configuration's generated name: names stay
    distinct per endpoint (runs against two endpoints never share a configuration) without
    carrying the URL into every page title; the configuration's page shows the URL itself."""
    return "endpoint " + hashlib.sha256(base_url.encode()).hexdigest()[:6]


def generated_name(*parts: str, base_url: str = "") -> str:
    """The name ``ab run-suite`` / ``ab run-agent`` give a configuration they create from
    their options: its parts joined, plus the endpoint's tag when one is named."""
    name = " ".join(p for p in parts if p)
    return f"{name} ({endpoint_tag(base_url)})" if base_url else name
