"""The price table as data (runs/prices.py): shipped with the list prices, edited in the admin
where overlapping dates for one name are refused naming the field, a price file imported as
rows from a date, and the rows handed to an attempt's gateway and agent."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from runs.prices import PriceEntry, price_rows
from runs.pricing import LIST_PRICES, lookup, price_table

pytestmark = pytest.mark.django_db

D = dt.date


def test_it_ships_the_list_prices_with_their_source() -> None:
    shipped = {e.pattern: e for e in PriceEntry.objects.all()}
    assert set(shipped) == {row.pattern for row in LIST_PRICES}
    sonnet = shipped["claude-sonnet-4-5"]
    assert (sonnet.input_per_mtok, sonnet.cache_write_per_mtok) == (Decimal(3), Decimal("3.75"))
    assert (sonnet.cache_read_per_mtok, sonnet.cache_write_1h_per_mtok) == (
        Decimal("0.3"),
        Decimal(6),
    )
    assert sonnet.source_url.startswith("https://docs.claude.com/")
    assert "as listed on 2025-11-01" in sonnet.note
    assert shipped["gpt-4.1"].cache_read_per_mtok == Decimal("0.5")


def add_form(**values) -> dict:
    base = {
        "pattern": "my-model",
        "effective_from": "2026-01-01",
        "effective_to": "",
        "input_per_mtok": "1",
        "output_per_mtok": "2",
        "cache_write_per_mtok": "",
        "cache_write_1h_per_mtok": "",
        "cache_read_per_mtok": "",
        "source_url": "",
        "note": "",
    }
    return {**base, **values}


def test_the_admin_refuses_overlapping_dates_naming_the_field(client, alice) -> None:
    client.force_login(alice)
    url = reverse("admin:runs_priceentry_add")
    first = client.post(url, add_form(effective_to="2026-06-01"))
    assert first.status_code == 302, first.content[:500]
    # Starts inside the first one's range: effective_from is named.
    inside = client.post(url, add_form(effective_from="2026-03-01"))
    assert inside.status_code == 200
    errors = inside.context["adminform"].form.errors
    assert "effective_from" in errors and "overlap" in errors["effective_from"][0]
    # Starts before and runs into it: effective_to is named.
    into = client.post(url, add_form(effective_from="2025-10-01", effective_to="2026-02-01"))
    assert "effective_to" in into.context["adminform"].form.errors
    # An end before the start, a negative price.
    backwards = client.post(url, add_form(effective_from="2027-01-01", effective_to="2026-12-01"))
    assert "effective_to" in backwards.context["adminform"].form.errors
    negative = client.post(url, add_form(effective_from="2027-01-01", input_per_mtok="-1"))
    assert "input_per_mtok" in negative.context["adminform"].form.errors
    # Right after it: accepted, and each day has one price.
    after = client.post(url, add_form(effective_from="2026-06-01", input_per_mtok="0.5"))
    assert after.status_code == 302
    rows = price_rows()
    assert lookup("my-model", price_table(rows, D(2026, 5, 31))).input_per_mtok == 1.0
    assert lookup("my-model", price_table(rows, D(2026, 6, 1))).input_per_mtok == 0.5
    assert lookup("my-model", price_table(rows, D(2025, 12, 31))) is None


def test_a_price_file_imports_as_rows_from_a_date(tmp_path) -> None:
    path = tmp_path / "prices.json"
    path.write_text(
        json.dumps(
            {
                "gpt-4o": {"input_per_mtok": 2.0, "output_per_mtok": 8.0, "cache_read_per_mtok": 1},
                "local-model": {"input_per_mtok": 0, "output_per_mtok": 0},
            }
        )
    )
    call_command("import_prices", str(path), "--from", "2026-12-01", "--source", "https://x.test")
    old, new = PriceEntry.objects.filter(pattern="gpt-4o").order_by("effective_from")
    assert old.effective_to == D(2026, 12, 1)  # the shipped row ends the day the new one starts
    assert (new.input_per_mtok, new.cache_read_per_mtok, new.effective_to) == (2, 1, None)
    rows = price_rows()
    assert lookup("gpt-4o", price_table(rows, D(2026, 11, 30))).input_per_mtok == 2.5
    assert lookup("gpt-4o", price_table(rows, D(2026, 12, 1))).input_per_mtok == 2.0
    # The same day again: refused, naming the entry, nothing changed.
    with pytest.raises(
        CommandError, match=r"gpt-4o: effective_from: these dates overlap .* from 2026-12-01 on"
    ):
        call_command("import_prices", str(path), "--from", "2026-12-01")
    assert PriceEntry.objects.filter(pattern="gpt-4o").count() == 2
    path.write_text('{"gpt-4o": {"input_per_mtok": -1, "output_per_mtok": 1}}')
    with pytest.raises(CommandError, match=r"gpt-4o\.input_per_mtok: expected a number >= 0"):
        call_command("import_prices", str(path), "--from", "2027-01-01")


def test_an_attempts_gateway_and_agent_get_the_tables_rows(settings) -> None:
    from runs.models import ModelConfig
    from runs.pipeline.agent_stage import model_settings_for

    PriceEntry.objects.filter(pattern="gpt-4o").update(input_per_mtok=Decimal("7.5"))
    config = ModelConfig.objects.create(
        name="cost-cli", slug="cost-cli", agent_variant="llm", model_name="gpt-4o"
    )
    rows = model_settings_for(config).price_rows
    assert lookup("gpt-4o", price_table(rows)).input_per_mtok == 7.5


def test_a_finished_attempt_keeps_its_cost_by_class_or_says_it_is_unknown() -> None:
    """What the agent's outcome says of its cost lands on the attempt (runs.lifecycle): by
    class when priced; NULL with the reason when a call had no price (before: $0)."""
    from runs.agents.contract import AgentOutcome
    from runs.lifecycle import attempt_finish
    from runs.models import Attempt, AttemptStatus
    from runs.pipeline.outcome import decide
    from runs.pipeline.persist import AttemptResult
    from runs.pricing import AttemptCost, CostBreakdown, TokenClasses
    from tasks_app.models import Task
    from tests.support.pages_fixtures import make_attempt, make_model, make_run, make_suite

    suite = make_suite("costs", tasks=2)
    run = make_run(suite, make_model("priced"))
    first, second = (
        make_attempt(run, task, status=AttemptStatus.RUNNING)
        for task in Task.objects.for_suite(suite)
    )
    tokens = TokenClasses(input=100, cache_write=50, cache_read=1000, output=20)
    priced = AttemptCost(tokens, CostBreakdown(0.0003, 0.000125, 0.0003, 0.0003))
    unknown = AttemptCost(tokens, CostBreakdown(0.0003, 0, 0, 0.0003, "1 of 2 model calls: no x"))
    for attempt, detail in ((first, priced), (second, unknown)):
        outcome = AgentOutcome(
            reason=None,
            stop="done",
            tokens_in=1150,
            tokens_out=20,
            cost_usd=0.0006,
            cost_detail=detail,
        )
        attempt_finish(attempt=attempt, result=AttemptResult(verdict=decide([]), agent=outcome))
    first, second = Attempt.objects.get(pk=first.pk), Attempt.objects.get(pk=second.pk)
    assert (first.cost_basis, first.tokens_cache_read, first.tokens_cache_write) == (
        "priced",
        1000,
        50,
    )
    assert float(first.cost_cache_write_usd) == pytest.approx(0.000125)
    assert first.usage.cost_usd == pytest.approx(0.0006)
    assert (second.cost_basis, second.cost_usd) == ("unknown", None)
    assert second.cost_note == "1 of 2 model calls: no x"
    assert second.usage.cost_unknown and second.usage.cost_usd is None
