"""The compare page's headline (issue 29, item 7): a difference of two rates is in percentage
points ("+58.0 pp", never "+58.0%"), and for a pair whose coverage differs (a partial run) the
delta on the tasks both attempted leads, the whole-suite rates after it."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from runs.templatetags.results import pp
from tests.support.pages_fixtures import make_model, make_run, make_suite, outcomes
from tests.support.partial_fixtures import FULL, PARTIAL, run_of

pytestmark = pytest.mark.django_db


def headline(client, suite, a: str, b: str) -> tuple[str, object]:
    response = client.get(reverse("suite-compare", args=[suite.name]), {"models": f"{a},{b}"})
    assert response.status_code == 200
    (pair,) = response.context["comparison"].pairs
    line = re.search(r'<p class="pair"[^>]*>(.*?)</p>', response.content.decode(), re.S).group(1)
    return line, pair


def test_the_delta_is_in_percentage_points(client):
    suite = make_suite("pp", tasks=5)
    failed = [["TESTS_FAILED"]]
    outcomes(make_run(suite, make_model("low")), [[None]] + failed * 4)
    outcomes(make_run(suite, make_model("high")), [[None]] * 4 + failed)
    line, pair = headline(client, suite, "low", "high")
    assert pair.delta == pytest.approx(0.6)
    assert '20.0% → 80.0%, delta <strong class="delta">+60.0 pp</strong>' in line
    assert "+60.0%" not in line
    assert (pp(-0.058), pp(0.0), pp(None)) == ("\u22125.8 pp", "\u00b10.0 pp", "—")


def test_a_partial_pair_leads_with_the_delta_on_the_shared_tasks(client, partial_suite):
    a, b = (
        f"{run_of(n).model_config.slug}@{str(run_of(n).public_id)[:8]}" for n in (PARTIAL, FULL)
    )
    line, pair = headline(client, partial_suite, a, b)
    assert pair.coverage_differs and pair.paired == 10
    shared, whole = pp(pair.shared_delta), pp(pair.delta)
    assert shared != whole  # the 10 shared tasks agree; the whole-suite rates do not
    assert line.startswith(
        f"On the 10 tasks both attempted: {100 * pair.test.shared_rate_a:.1f}% → "
        f'{100 * pair.test.shared_rate_b:.1f}%, delta <strong class="delta">{shared}</strong>'
    )
    assert line.index(shared) < line.index(whole)
    assert f"{100 * pair.rate_a:.1f}% → {100 * pair.rate_b:.1f}%" in line
