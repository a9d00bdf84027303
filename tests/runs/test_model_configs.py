from __future__ import annotations

import json

import pytest
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.test import RequestFactory

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


# -- a cost budget needs a price ------------------------------------------------------------------

COSTED = {
    "name": "local coder",
    "agent_variant": "cli",
    "cli_agent": "mini-swe-agent",
    "model_name": "my-local-model",
    "max_cost_usd": "0.50",
}


def test_a_cost_budget_for_an_unpriced_model_is_refused_naming_the_field(db):
    """An unpriced model cost $0, so its cost budget never ran out."""
    with pytest.raises(ValidationError) as caught:
        ModelConfig(**COSTED).full_clean(exclude=["slug"])  # the slug is made on save
    (message,) = caught.value.message_dict["max_cost_usd"]
    assert "'my-local-model'" in message and "price_input_per_mtok" in message
    priced = ModelConfig(**COSTED, price_input_per_mtok="0.1", price_output_per_mtok="0.2")
    priced.full_clean(exclude=["slug"])  # its own prices
    table = ModelConfig(**{**COSTED, "model_name": "claude-opus-4-1"})
    table.full_clean(exclude=["slug"])  # the price table's
    ModelConfig(**{**COSTED, "max_cost_usd": None}).full_clean(exclude=["slug"])  # no budget


def test_the_api_and_the_admin_refuse_it_too(client, alice, staff_auth):
    refused = client.post(
        "/api/model-configs", json.dumps(COSTED), content_type="application/json", **staff_auth
    )
    assert refused.status_code == 400
    assert refused.json()["errors"][0]["field"] == "max_cost_usd"
    assert not ModelConfig.objects.filter(name=COSTED["name"]).exists()
    request = RequestFactory().get("/admin/runs/modelconfig/add/")
    request.user = alice
    model_admin = admin.site._registry[ModelConfig]
    form_class = model_admin.get_form(request)
    fields = {
        "slug": "local-coder",
        "max_steps": 30,
        "max_time_sec": 1800,
        "repeated_failure_threshold": 3,
        "extra_params": "{}",
        "workspace_files": "{}",
    }
    form = form_class(data={**fields, **COSTED})
    assert not form.is_valid()
    assert "max_cost_usd" in form.errors, form.errors
    priced = form_class(
        data={**fields, **COSTED, "price_input_per_mtok": "1", "price_output_per_mtok": "2"}
    )
    assert priced.is_valid(), priced.errors
