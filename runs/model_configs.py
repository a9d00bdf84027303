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
