"""One definition of a score: the leaderboard page, the compare page, the taxonomy, the API
(JSON and CSV), the compare exports and ``ab leaderboard`` show the same figures for every
row and every pair, on the demo data and on a suite with k = 3 and two runs of one model."""

from __future__ import annotations

import csv
import io
import itertools
import json
import re

import pytest
from django.core.management import call_command
from django.urls import reverse

from benchsite.cli.main import main as ab
from runs.models import AgentVariant, Attempt, AttemptStatus, RunSource
from runs.results.scoring import paired_test
from runs.templatetags.results import kilo, secs, tenths, usd
from tasks_app.models import Suite, Task
from tests.pages_fixtures import (
    artifacts_root,  # noqa: F401 - fixture
    make_attempt,
    make_model,
    make_run,
    make_suite,
    outcomes,
)

pytestmark = pytest.mark.django_db

F, R, I = "TESTS_FAILED", None, "SANDBOX_ERROR"  # noqa: E741


@pytest.fixture
def k3_suite():
    """k = 3 samples, two runs of one model (k = 3 then k = 1), a published system, an oracle,
    and a run with queued and running attempts."""
    suite = make_suite("k3", tasks=8)
    tasks = list(Task.objects.for_suite(suite).order_by("task_id"))
    Task.objects.filter(pk__in=[t.pk for t in tasks[:3]]).update(
        repo_url="https://github.com/org/alpha"
    )
    twice = make_model("twice")
    first = make_run(suite, twice, samples=3)
    outcomes(
        first,
        [[R, R, F], [R, F, F], [F, F, F], [R, R, R], [I, R, F], [R, F, R], [F, F, R], [R, R, R]],
    )
    # Model API calls: 2-4 per attempt in the first run, none recorded in the second.
    for attempt in Attempt.objects.filter(run=first):
        Attempt.objects.filter(pk=attempt.pk).update(steps=2 + attempt.sample_index)
    outcomes(make_run(suite, twice), [[F], [R], [R], [R], [F], [I], [F], [R]])
    outcomes(
        make_run(suite, make_model("steady"), samples=3),
        [[F, F, F], [R, F, F], [F, F, F], [R, R, F], [F, F, F], [F, F, R], [F, F, F], [R, F, R]],
    )
    outcomes(
        make_run(suite, make_model("one-shot")),
        [[R], [R], [F], [R], [R], [R], [F], [R]],
    )
    published = make_run(
        suite, make_model("paper", AgentVariant.EXTERNAL), source=RunSource.PUBLISHED
    )
    for task, reason in zip(tasks[:6], [R, F, R, R, I, F], strict=True):
        make_attempt(published, task, reason)
    make_attempt(published, tasks[6], "UNKNOWN", missing=True)
    outcomes(make_run(suite, make_model("gold", AgentVariant.ORACLE)), [[R]] * 8)
    busy = make_run(suite, make_model("busy"), samples=1)
    outcomes(busy, [[R], [F], [R]])
    for task, status in zip(
        tasks[3:], [AttemptStatus.QUEUED] * 4 + [AttemptStatus.RUNNING], strict=True
    ):
        make_attempt(busy, task, status=status)
    return suite


@pytest.fixture
def demo(artifacts_root):  # noqa: F811
    call_command("seed_demo")
    return Suite.objects.get(name="swebench-lite-dev")


def close(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return abs(float(a) - float(b)) < 1e-9


FIELDS = ("rate", "ci_low", "ci_high", "resolved", "tasks", "pending", "pass_at_k")
# Usage per attempt that ran, and how the page shows each.
USAGE = {
    "mean_cost_usd": usd,
    "mean_tokens": kilo,
    "mean_calls": tenths,
    "mean_wall_sec": secs,
    "cost_per_resolved_usd": usd,
}


def figures(rate, ci_low, ci_high, resolved, tasks, pending, pass_at_k) -> tuple:
    return (rate, ci_low, ci_high, resolved, tasks, pending, pass_at_k)


def picked(record: dict, fields=FIELDS) -> tuple:
    """The figures of an exported record (JSON values, or CSV strings)."""
    values = [record[k] for k in fields]
    return tuple(float(v) if isinstance(v, str) and v else None if v == "" else v for v in values)


def same(got: tuple, want: tuple, where: str) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        if isinstance(w, float) or isinstance(g, float):
            assert close(g, w), f"{where}: {got} != {want}"
        else:
            assert g == w, f"{where}: {got} != {want}"


def row_html(body: str, key: str) -> str:
    match = re.search(rf'<tr [^>]*data-key="{re.escape(key)}"[^>]*>(.*?)</tr>', body, re.S)
    assert match, f"no leaderboard row for {key}"
    return match.group(1)


def check_everywhere(client, capsys, suite: Suite) -> None:
    url = reverse("suite-leaderboard", args=[suite.name])
    for view in ("runs", "configs"):
        page = client.get(url, {"view": view})
        assert page.status_code == 200
        rows = page.context["board"].all_rows
        assert len(rows) >= 4
        want = {
            r.key: figures(r.rate, r.ci_low, r.ci_high, r.resolved, r.tasks, r.pending, r.pass_at_k)
            for r in rows
        }
        p_values = {r.key: r.p_value_vs_leader for r in rows}
        usage = {r.key: tuple(getattr(r, f) for f in USAGE) for r in rows}
        assert any(r.mean_calls for r in rows) and any(r.mean_calls is None for r in rows)
        body = page.content.decode()
        for r in rows:
            html = row_html(body, r.key)
            rate = "—" if r.rate is None else f"{100 * r.rate:.1f}%"
            assert rate in html
            assert r.score.resolved_label in html
            for value, (field, shown) in zip(usage[r.key], USAGE.items(), strict=True):
                assert f'<td class="num">{shown(value)}</td>' in html, (r.key, field)

        api = client.get("/api/leaderboard", {"suite": suite.name, "view": view}).json()["rows"]
        assert {row["key"] for row in api} == set(want)
        for row in api:
            got = picked(row)
            same(got, want[row["key"]], f"API {view} {row['key']}")
            same(picked(row, USAGE), usage[row["key"]], f"API usage {view} {row['key']}")
            assert close(row["p_value_vs_leader"], p_values[row["key"]])

        text = client.get("/api/leaderboard.csv", {"suite": suite.name, "view": view})
        for row in csv.DictReader(io.StringIO(text.content.decode())):
            same(picked(row), want[row["key"]], f"CSV {view} {row['key']}")
            same(picked(row, USAGE), usage[row["key"]], f"CSV usage {view} {row['key']}")

        capsys.readouterr()
        assert ab(["leaderboard", suite.name, "--view", view, "--json"]) == 0
        cli = json.loads(capsys.readouterr().out)["rows"]
        for row in cli:
            got = picked(row)
            same(got, want[row["key"]], f"CLI {view} {row['key']}")
            same(picked(row, USAGE), usage[row["key"]], f"CLI usage {view} {row['key']}")
        assert ab(["leaderboard", suite.name, "--view", view]) == 0
        table = capsys.readouterr().out
        for r in rows:
            line = next(ln for ln in table.splitlines() if f" {r.key[:44]} " in ln)
            assert ("-" if r.rate is None else f"{100 * r.rate:.1f}%") in line
            assert r.score.resolved_label in line

        check_pairs(client, suite, page.context["board"], want)
        if view == "configs":
            check_taxonomy(client, suite, want)
        else:
            run_rates = {str(r.run.public_id): r.rate for r in rows}
            taxonomy = client.get("/api/taxonomy", {"suite": suite.name}).json()
            for point in taxonomy["points"]:
                assert close(point["rate"], run_rates[point["run"]])


def check_pairs(client, suite: Suite, board, want: dict) -> None:
    rows = {r.key: r for r in board.all_rows}
    leader = board.leader
    compare = reverse("suite-compare", args=[suite.name])
    for a, b in itertools.combinations(sorted(rows), 2):
        models = f"{a},{b}"
        page = client.get(compare, {"models": models})
        assert page.status_code == 200, page.content[:300]
        comparison = page.context["comparison"]
        for summary in comparison.summaries:
            s = summary.score
            same(
                figures(s.rate, s.ci_low, s.ci_high, s.resolved, s.tasks, s.pending, s.pass_at_k),
                want[summary.entry.key],
                f"compare {models} {summary.entry.key}",
            )
        (pair,) = comparison.pairs
        expected = paired_test(rows[a].score, rows[b].score)
        assert close(pair.p_value, expected.p_value)
        assert len(pair.fixed_by_b) == len(expected.better)
        if leader is not None and leader.key == a and rows[b].p_value_vs_leader is not None:
            assert close(pair.p_value, rows[b].p_value_vs_leader)
        if leader is not None and leader.key == b and rows[a].p_value_vs_leader is not None:
            assert close(pair.p_value, rows[a].p_value_vs_leader)
        body = page.content.decode()
        pair_line = re.search(r'<p class="pair"[^>]*>(.*?)</p>', body, re.S).group(1)
        for rate in (pair.rate_a, pair.rate_b):
            assert ("—" if rate is None else f"{100 * rate:.1f}%") in pair_line

        api = client.get("/api/compare", {"suite": suite.name, "models": models}).json()
        exported = client.get(compare, {"models": models, "format": "json"}).json()
        for data in (api, exported):
            for summary in data["summaries"]:
                got = picked(summary)
                same(got, want[summary["key"]], f"compare JSON {models}")
            (p,) = data["pairs"]
            assert close(p["p_value"], pair.p_value)
            assert close(p["rate_a"], want[a][0]) and close(p["rate_b"], want[b][0])


def check_taxonomy(client, suite: Suite, want: dict) -> None:
    page = client.get(reverse("suite-taxonomy", args=[suite.name]))
    body = page.content.decode()
    for b in page.context["breakdown"].models:
        s = b.score
        got = figures(s.rate, s.ci_low, s.ci_high, s.resolved, s.tasks, s.pending, s.pass_at_k)
        same(got, want[b.model.slug], f"taxonomy {b.model.slug}")
        row = re.search(rf'<tr data-model="{b.model.slug}">(.*?)</tr>', body, re.S).group(1)
        assert s.resolved_label in row
    api = client.get("/api/taxonomy", {"suite": suite.name}).json()
    for m in api["models"]:
        assert close(m["score"]["rate"], want[m["model"]["slug"]][0])
    text = client.get("/api/taxonomy.csv", {"suite": suite.name}).content.decode()
    slug_of = {b.model.name: b.model.slug for b in page.context["breakdown"].models}
    for row in csv.DictReader(io.StringIO(text)):
        assert close(float(row["rate"]) if row["rate"] else None, want[slug_of[row["model"]]][0])


def test_it_shows_the_same_figures_everywhere_on_a_k3_suite_with_two_runs(client, capsys, k3_suite):
    check_everywhere(client, capsys, k3_suite)


def test_it_shows_the_same_figures_everywhere_on_the_demo_data(client, capsys, demo):
    check_everywhere(client, capsys, demo)
    check_everywhere(client, capsys, Suite.objects.get(name="custom-dev"))
