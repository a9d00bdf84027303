"""Writes and look-ups for model configurations, shared by the API and the pages."""

from __future__ import annotations

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
