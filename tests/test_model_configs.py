from __future__ import annotations

from runs.models import ModelConfig


def test_names_that_slugify_alike_get_distinct_slugs(db):
    first = ModelConfig.objects.create(name="Agent X", agent_variant="llm")
    second = ModelConfig.objects.create(name="agent x", agent_variant="llm")
    third = ModelConfig.objects.create(name="agent/x", agent_variant="llm")
    assert [first.slug, second.slug, third.slug] == ["agent-x", "agent-x-2", "agent-x-3"]


def test_a_saved_slug_does_not_change_on_resave(db):
    config = ModelConfig.objects.create(name="gpt-4o", agent_variant="llm")
    config.description = "changed"
    config.save()
    config.refresh_from_db()
    assert config.slug == "gpt-4o"
