"""Writes and look-ups for model configurations, shared by the API and the pages."""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

from django.db import transaction
from django.utils.text import slugify

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


def model_config_create(*, fields: dict[str, Any]) -> ModelConfig:
    """Create a model configuration from column values, validated like the admin form does.

    Raises django's ValidationError naming each bad field (a taken name, an out-of-range
    number). Two names that slugify alike get distinct slugs ("gpt-4", "gpt-4-2").
    """
    with transaction.atomic():
        config = ModelConfig(**fields)
        config.slug = _free_slug(config.name)
        config.full_clean()
        config.save()
    return config


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
