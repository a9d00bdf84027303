"""One definition of a score: the leaderboard page, the compare page, the taxonomy, the API
(JSON and CSV), the compare exports and ``ab leaderboard`` show the same figures for every
row and every pair, on the demo data, on a suite with k = 3 and two runs of one model, and on
a suite where runs cover part of it (tests/support/partial_fixtures.py: real imported reports): both
rates, the missing state and the paired test over the tasks both rows attempted."""

from __future__ import annotations

import csv
import datetime as dt
import io
import itertools
import json
import re
from decimal import Decimal

import pytest
from django.core.management import call_command
from django.urls import reverse

from benchsite.cli.main import main as ab
from runs.models import AgentVariant, Attempt, AttemptFlag, AttemptStatus, RunSource
from runs.results.leaderboard import COST_RECORD_FIELDS, leaderboard_rows
from runs.results.scoring import paired_test
from runs.templatetags.results import kilo, secs, tenths, usd
from runs.usage_fields import CostBasis
from tasks_app.models import Suite, Task
from tests.support.pages_fixtures import make_attempt, make_model, make_run, make_suite, outcomes
from tests.support.partial_fixtures import FULL, PARTIAL, PARTIAL_IDS, run_of

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
    # Model API calls: 2-4 per attempt in the first run, none recorded in the second. The
    # first run's cost is broken down by class (cache reads in sample 1 and 2); one attempt's
    # cost is unknown (a price missing).
    for attempt in Attempt.objects.filter(run=first):
        n = attempt.sample_index
        Attempt.objects.filter(pk=attempt.pk).update(
            steps=2 + n,
            cost_basis=CostBasis.PRICED,
            cost_usd=Decimal("0.10") + Decimal("0.01") * n,
            cost_input_usd=Decimal("0.05"),
            cost_cache_write_usd=Decimal("0.01"),
            cost_cache_read_usd=Decimal("0.01") * n,
            cost_output_usd=Decimal("0.04"),
            tokens_cache_write=200,
            tokens_cache_read=300 * n,
        )
    Attempt.objects.filter(pk=Attempt.objects.filter(run=first).order_by("pk")[0].pk).update(
        cost_basis=CostBasis.UNKNOWN, cost_usd=None, cost_note="1 of 2 model calls: no price"
    )
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
        make_attempt(published, task, reason, cost_basis=CostBasis.REPORTED)
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
def demo(artifacts_root):
    call_command("seed_demo")
    return Suite.objects.get(name="swebench-lite-dev")


def close(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return abs(float(a) - float(b)) < 1e-9


FIELDS = (
    "rate",
    "ci_low",
    "ci_high",
    "resolved",
    "tasks",
    "pending",
    "pass_at_k",
    "attempted_rate",
    "attempted_ci_low",
    "attempted_ci_high",
    "attempted_tasks",
    "missing",
    "pass_hat_k",
    "pass_hat_k_ci_low",
    "pass_hat_k_ci_high",
    "disagreeing_tasks",
    "flagged",
    "resolved_attempts",
)
# Usage per attempt that ran, and how the page shows each.
USAGE = {
    "mean_cost_usd": usd,
    "mean_tokens": kilo,
    "mean_calls": tenths,
    "mean_wall_sec": secs,
    "cost_per_resolved_usd": usd,
}


def figures(s) -> tuple:
    """A score's figures, in FIELDS' order."""
    return tuple(getattr(s, f) for f in FIELDS)


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


def check_everywhere(client, capsys, suite: Suite, *, count_out: bool = False) -> None:
    """``count_out``: with flagged successes counted as failures (the compare page and the
    taxonomy take no such parameter: their checks are the plain reading's)."""
    url = reverse("suite-leaderboard", args=[suite.name])
    out = {"count_out_flagged": "1"} if count_out else {}
    for view in ("runs", "configs"):
        page = client.get(url, {"view": view, **out})
        assert page.status_code == 200
        rows = page.context["board"].all_rows
        assert len(rows) >= 4
        want = {r.key: figures(r.score) for r in rows}
        p_values = {r.key: r.p_value_vs_leader for r in rows}
        paired = {r.key: r.paired_vs_leader for r in rows}
        usage = {r.key: tuple(getattr(r, f) for f in USAGE) for r in rows}
        costs = {r.key: tuple(r.cost_record().values()) for r in rows}
        assert tuple(rows[0].cost_record()) == COST_RECORD_FIELDS
        assert any(r.mean_calls for r in rows) and any(r.mean_calls is None for r in rows)
        body = page.content.decode()
        for r in rows:
            html = row_html(body, r.key)
            rate = "—" if r.rate is None else f"{100 * r.rate:.1f}%"
            assert rate in html
            assert r.score.resolved_label in html
            cell = re.search(r'<td class="num attempted">(.*?)</td>', html, re.S).group(1)
            attempted = r.score.attempted_rate
            assert ("—" if attempted is None else f"{100 * attempted:.1f}%") in cell
            assert r.score.attempted_label in cell
            if r.pass_hat_k is not None:
                split = f"{r.score.disagreeing_tasks} split"
                assert f'{100 * r.pass_hat_k:.1f}%<div class="small muted pass-hat-k"' in html
                assert split in html, (r.key, split)
            for value, (field, shown) in zip(usage[r.key], USAGE.items(), strict=True):
                if field != "mean_cost_usd":
                    assert f'<td class="num">{shown(value)}</td>' in html, (r.key, field)
            check_cost_cell(r, html)
            flagged = f'data-flagged="{r.score.flagged}"'
            assert (flagged in html) is bool(r.score.flagged), (r.key, r.score.flagged)
            assert r.score.flagged_counted_out is count_out

        query = {"suite": suite.name, "view": view, **out}
        api = client.get("/api/leaderboard", query).json()["rows"]
        assert {row["key"] for row in api} == set(want)
        for row in api:
            got = picked(row)
            same(got, want[row["key"]], f"API {view} {row['key']}")
            same(picked(row, USAGE), usage[row["key"]], f"API usage {view} {row['key']}")
            same(picked(row, COST_RECORD_FIELDS), costs[row["key"]], f"API cost {row['key']}")
            assert close(row["p_value_vs_leader"], p_values[row["key"]])
            assert row["paired_vs_leader"] == paired[row["key"]]

        text = client.get("/api/leaderboard.csv", query)
        for row in csv.DictReader(io.StringIO(text.content.decode())):
            same(picked(row), want[row["key"]], f"CSV {view} {row['key']}")
            same(picked(row, USAGE), usage[row["key"]], f"CSV usage {view} {row['key']}")
            same(picked(row, COST_RECORD_FIELDS), costs[row["key"]], f"CSV cost {row['key']}")
            p = row["p_value_vs_leader"]
            assert close(float(p) if p else None, p_values[row["key"]])

        capsys.readouterr()
        flag = ["--count-out-flagged"] if count_out else []
        assert ab(["leaderboard", suite.name, "--view", view, "--json", *flag]) == 0
        cli = json.loads(capsys.readouterr().out)["rows"]
        for row in cli:
            got = picked(row)
            same(got, want[row["key"]], f"CLI {view} {row['key']}")
            same(picked(row, USAGE), usage[row["key"]], f"CLI usage {view} {row['key']}")
            same(picked(row, COST_RECORD_FIELDS), costs[row["key"]], f"CLI cost {row['key']}")
        assert ab(["leaderboard", suite.name, "--view", view, *flag]) == 0
        table = capsys.readouterr().out
        for r in rows:
            line = next(ln for ln in table.splitlines() if f" {r.key[:44]} " in ln)
            assert (f"; {r.score.flagged} flagged" in line) is bool(r.score.flagged), line
            assert ("-" if r.rate is None else f"{100 * r.rate:.1f}%") in line
            assert r.score.resolved_label in line
            attempted = r.score.attempted_rate
            assert ("-" if attempted is None else f"{100 * attempted:.1f}%") in line
            assert r.score.attempted_label in line

        if count_out:
            continue
        check_pairs(client, suite, page.context["board"], want)
        if view == "configs":
            check_taxonomy(client, suite, want)
        else:
            run_rates = {str(r.run.public_id): r.rate for r in rows}
            for r in rows:  # the run page sums its cost as its row does
                check_run_cost(client, r)
            taxonomy = client.get("/api/taxonomy", {"suite": suite.name}).json()
            for point in taxonomy["points"]:
                assert close(point["rate"], run_rates[point["run"]])


def check_cost_cell(r, html: str) -> None:
    """The leaderboard's cost cell: the mean (or "unknown" when no attempt's cost is known
    and some is unknown), the mean by class, and the unknown and reported counts."""
    cell = re.search(r'<td class="num cost">(.*?)</td>', html, re.S)
    assert cell, r.key
    text = cell.group(1)
    mean = r.mean_cost_usd
    head = "unknown" if mean is None and r.cost_unknown_attempts else usd(mean)
    assert text.startswith(head), (r.key, text)
    parts = r.mean_cost_breakdown
    classes = re.search(r'<div class="small muted cost-classes">(.*?)</div>', text)
    if parts["input"] is None:
        assert classes is None, r.key
    else:
        want = " · ".join(
            f"{label} {usd(parts[k])}"
            for k, label in (
                ("input", "input"),
                ("cache_write", "cache write"),
                ("cache_read", "cache read"),
                ("output", "output"),
            )
        )
        assert classes and classes.group(1) == want, (r.key, text)
    unknown = re.search(r'class="small muted cost-unknown"[^>]*>(\d+) unknown<', text)
    assert (int(unknown.group(1)) if unknown else 0) == r.cost_unknown_attempts, r.key
    reported = re.search(r'class="small muted cost-reported"[^>]*>(\d+) reported<', text)
    assert (int(reported.group(1)) if reported else 0) == r.cost_reported_attempts, r.key


def check_run_cost(client, r) -> None:
    body = client.get(reverse("run-detail", args=[r.run.public_id])).content.decode()
    line = re.search(r'<p id="run-cost">(.*?)</p>', body, re.S)
    if r.mean_cost_usd is None and not r.cost_unknown_attempts:
        assert line is None or "reported" in line.group(1), r.key
        return
    assert line, r.key
    text = line.group(1)
    assert f"<strong>{usd(r.total_cost_usd or 0)}</strong>" in text, (r.key, text)
    assert f"({usd(r.mean_cost_usd)} per attempt)" in text, (r.key, text)
    unknown = re.search(r'cost-unknown">(\d+) unknown<', text)
    assert (int(unknown.group(1)) if unknown else 0) == r.cost_unknown_attempts, r.key
    if r.mean_cost_breakdown["input"] is not None:
        assert 'id="run-cost-classes"' in text, r.key


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
            same(
                figures(summary.score),
                want[summary.entry.key],
                f"compare {models} {summary.entry.key}",
            )
        (pair,) = comparison.pairs
        expected = paired_test(rows[a].score, rows[b].score)
        assert close(pair.p_value, expected.p_value)
        assert len(pair.fixed_by_b) == len(expected.better)
        assert (pair.paired, pair.test.only_a, pair.test.only_b) == (
            expected.tasks,
            expected.only_a,
            expected.only_b,
        )
        if leader is not None and leader.key == a and rows[b].p_value_vs_leader is not None:
            assert close(pair.p_value, rows[b].p_value_vs_leader)
        if leader is not None and leader.key == b and rows[a].p_value_vs_leader is not None:
            assert close(pair.p_value, rows[a].p_value_vs_leader)
        body = page.content.decode()
        for summary in comparison.summaries:
            card = re.search(
                rf'<div class="card summary" data-key="{re.escape(summary.entry.key)}">(.*?)'
                r"</div></div>",
                body,
                re.S,
            ).group(1)
            hat = summary.score.pass_hat_k
            shown = re.search(r'<strong class="pass-hat-k">([^<]*)</strong>', card)
            expected = None if hat is None else f"{100 * hat:.1f}%"
            assert (shown.group(1) if shown else None) == expected, summary.entry.key
        pair_line = re.search(r'<p class="pair"[^>]*>(.*?)</p>', body, re.S).group(1)
        for rate in (pair.rate_a, pair.rate_b):
            assert ("—" if rate is None else f"{100 * rate:.1f}%") in pair_line
        assert f'<span class="paired-n">{pair.paired}</span>' in pair_line
        assert ("Coverage differs" in body) is pair.coverage_differs

        api = client.get("/api/compare", {"suite": suite.name, "models": models}).json()
        exported = client.get(compare, {"models": models, "format": "json"}).json()
        for data in (api, exported):
            for summary in data["summaries"]:
                got = picked(summary)
                same(got, want[summary["key"]], f"compare JSON {models}")
            (p,) = data["pairs"]
            assert close(p["p_value"], pair.p_value)
            assert close(p["rate_a"], want[a][0]) and close(p["rate_b"], want[b][0])
            assert (p["paired"], p["only_a"], p["only_b"]) == (
                pair.paired,
                pair.test.only_a,
                pair.test.only_b,
            )
            assert close(p["attempted_rate_a"], rows[a].score.attempted_rate)


def check_taxonomy(client, suite: Suite, want: dict) -> None:
    page = client.get(reverse("suite-taxonomy", args=[suite.name]))
    body = page.content.decode()
    for b in page.context["breakdown"].models:
        s = b.score
        same(figures(s), want[b.model.slug], f"taxonomy {b.model.slug}")
        row = re.search(rf'<tr data-model="{b.model.slug}">(.*?)</tr>', body, re.S).group(1)
        assert s.resolved_label in row
    api = client.get("/api/taxonomy", {"suite": suite.name}).json()
    missing = {b.model.slug: b.missing for b in page.context["breakdown"].models}
    for m in api["models"]:
        same(picked(m["score"]), want[m["model"]["slug"]], f"taxonomy API {m['model']['slug']}")
        assert m["missing"] == missing[m["model"]["slug"]]
    text = client.get("/api/taxonomy.csv", {"suite": suite.name}).content.decode()
    slug_of = {b.model.name: b.model.slug for b in page.context["breakdown"].models}
    at = {f: FIELDS.index(f) for f in FIELDS}
    for row in csv.DictReader(io.StringIO(text)):
        want_row = want[slug_of[row["model"]]]
        assert close(float(row["rate"]) if row["rate"] else None, want_row[at["rate"]])
        attempted = float(row["attempted_rate"]) if row["attempted_rate"] else None
        assert close(attempted, want_row[at["attempted_rate"]])
        assert int(row["missing"]) == missing[slug_of[row["model"]]]


def test_it_shows_the_same_figures_everywhere_on_a_k3_suite_with_two_runs(client, capsys, k3_suite):
    check_everywhere(client, capsys, k3_suite)
    # The k = 3 run's reliability (issue 32 item 5), by hand from its outcomes above: of its 8
    # tasks, all 3 samples resolved on 2 (pass^3 = 2/8), 5 split (a task with an
    # infrastructure failure has 2 scored samples, R and F: split; pass^3 with n = 2 is 0).
    board = leaderboard_rows(suite=k3_suite)
    first = next(r for r in board if r.k == 3 and r.entry.run and r.score.tasks == 8)
    assert first.pass_hat_k == 2 / 8 and first.score.disagreeing_tasks == 5


def flag_successes(suite: Suite) -> int:
    """An integrity flag on every third resolved attempt of ``suite`` and on one failed one
    (not a flagged success); how many successes carry one."""
    attempts = Attempt.objects.filter(suite=suite, status=AttemptStatus.FINISHED).order_by("id")
    resolved = [a for a in attempts if a.resolved and not a.is_infra][::3]
    failed = next(a for a in attempts if a.failure_reason_id == F)
    AttemptFlag.objects.bulk_create(
        AttemptFlag(attempt=a, rule="touches_tests", rule_version=1, detail="tests/test_x.py")
        for a in [*resolved, failed]
    )
    # Two rules on one success: still one flagged success.
    AttemptFlag.objects.create(attempt=resolved[0], rule="fewer_tests", rule_version=1)
    return len(resolved)


def test_flagged_successes_read_the_same_everywhere_and_can_be_counted_out(
    client, capsys, k3_suite
):
    plain = {r.key: r.score for r in leaderboard_rows(suite=k3_suite, view="configs")}
    # Rendered (and cached) before the flags: a write of flags alone moves the pages on.
    url = reverse("suite-leaderboard", args=[k3_suite.name])
    assert "data-flagged" not in client.get(url, {"view": "runs"}).content.decode()
    flagged = flag_successes(k3_suite)
    assert flagged >= 5
    check_everywhere(client, capsys, k3_suite)
    check_everywhere(client, capsys, k3_suite, count_out=True)
    rows = leaderboard_rows(suite=k3_suite, view="configs")
    assert sum(r.score.flagged for r in rows) == flagged
    # A date window reads them from the selected attempts instead: the same count.
    windowed = leaderboard_rows(suite=k3_suite, view="configs", date_from=dt.date(2026, 9, 1))
    assert sum(r.score.flagged for r in windowed) == flagged
    out = {
        r.key: r.score
        for r in leaderboard_rows(suite=k3_suite, view="configs", count_out_flagged=True)
    }
    for r in rows:
        # Counted as successes by default: the figures of before, with the count beside them.
        assert r.score.resolved_attempts == plain[r.key].resolved_attempts
        assert r.score.rate == plain[r.key].rate
        # Counted out: each flagged success is a failure.
        got = out[r.key]
        assert got.flagged == r.score.flagged
        assert got.resolved_attempts == r.score.resolved_attempts - r.score.flagged
        if r.score.flagged:
            assert got.rate < r.score.rate
        else:
            assert got.rate == r.score.rate


@pytest.mark.slow
def test_it_shows_the_same_figures_everywhere_on_the_demo_data(client, capsys, demo):
    check_everywhere(client, capsys, demo)
    check_everywhere(client, capsys, Suite.objects.get(name="custom-dev"))


def test_it_shows_the_same_figures_everywhere_on_a_suite_runs_cover_in_part(
    client,
    capsys,
    partial_suite,
):
    check_everywhere(client, capsys, partial_suite)
    # Imported runs keep the cost their trajectories report, marked so (never re-priced).
    costed = Attempt.objects.filter(
        suite=partial_suite, run__source=RunSource.PUBLISHED, cost_usd__isnull=False
    )
    assert costed.exists()
    assert set(costed.values_list("cost_basis", flat=True)) == {CostBasis.REPORTED}


def test_a_partial_run_reads_the_same_on_every_surface(client, capsys, partial_suite):
    """The run that attempted 10 of the 20 instances (5 resolved): 25% over the suite, 50% on
    what it attempted; its 10 other instances are not attempted everywhere, never failures."""
    suite = partial_suite
    run = run_of(PARTIAL)
    key = f"{run.model_config.slug}@{str(run.public_id)[:8]}"
    board = client.get(reverse("suite-leaderboard", args=[suite.name]))
    row = next(r for r in board.context["board"].all_rows if r.key == key)
    s = row.score
    assert (s.rate, s.resolved_label, s.ci_low) == (0.25, "5 / 20", pytest.approx(s.ci_low))
    assert (s.attempted_rate, s.attempted_label) == (0.5, "5 / 10")
    assert (s.attempts, s.missing, s.missing_attempts, s.scored) == (10, 10, 10, 10)
    html = row_html(board.content.decode(), key)
    assert "25.0%" in html and "50.0%" in html and "10 of 20 not attempted" in html
    # The full run leads; the paired test covers the 10 tasks both attempted, where they agree;
    # ranked by its whole-suite rate, the partial run claims no tie either way (issue 29): it
    # is marked partial, its comparison with the leader one click away.
    leader = board.context["board"].leader
    assert leader.name == FULL
    assert (row.p_value_vs_leader, row.paired_vs_leader, row.status) == (1.0, 10, "partial")
    assert row.coverage_differs_from_leader and not row.tied_with_leader
    assert "partial: 10 of 20 tasks" in html and "badge tied" not in html
    assert f"?models={leader.key},{key}" in html

    api = client.get("/api/leaderboard", {"suite": suite.name}).json()["rows"]
    got = next(r for r in api if r["key"] == key)
    assert (got["rate"], got["attempted_rate"], got["missing"], got["attempts"]) == (
        0.25,
        0.5,
        10,
        10,
    )
    assert (got["p_value_vs_leader"], got["paired_vs_leader"]) == (1.0, 10)
    assert (got["status"], got["tied_with_leader"], got["rank"]) == ("partial", False, row.rank)
    text = client.get("/api/leaderboard.csv", {"suite": suite.name}).content.decode()
    got_csv = next(r for r in csv.DictReader(io.StringIO(text)) if r["key"] == key)
    assert (got_csv["attempted_pct"], got_csv["resolved_pct"], got_csv["missing"]) == (
        "50.0",
        "25.0",
        "10",
    )
    capsys.readouterr()
    assert ab(["leaderboard", suite.name]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if f" {key[:44]} " in ln)
    assert "25.0%" in line and "50.0%" in line and "5 / 10" in line
    assert "n = 10, coverage differs" in line and "10 not attempted" in line

    # The run page: both rates, the missing count, no failure among them.
    page = client.get(run.get_absolute_url()).content.decode()
    score = page[page.index('id="run-score"') :]
    assert "25.0%" in score and "50.0%" in score and "5 / 10" in score
    outcomes_table = page[page.index('id="run-outcomes"') :]
    outcomes_table = outcomes_table[: outcomes_table.index("</table>")]
    assert "TESTS_FAILED" in outcomes_table and ">5<" in outcomes_table
    assert 'not attempted</span></td><td class="num">10<' in outcomes_table

    # The taxonomy: 5 TESTS_FAILED in the bars, table and CSV, the 10 missing apart.
    taxonomy = client.get("/api/taxonomy", {"suite": suite.name}).json()
    model = next(m for m in taxonomy["models"] if m["model"]["name"] == PARTIAL)
    assert model["counts"] == {"TESTS_FAILED": 5} and (model["total"], model["missing"]) == (10, 10)
    chart = client.get(reverse("suite-taxonomy-chart", args=[suite.name])).json()
    failed = next(b for b in chart["bars"] if b["name"].startswith("TESTS_FAILED"))
    assert failed["y"][failed["x"].index(PARTIAL)] == 5
    assert not any("missing" in b["name"] or "attempted" in b["name"] for b in chart["bars"])
    text = client.get("/api/taxonomy.csv", {"suite": suite.name}).content.decode()
    got_csv = next(r for r in csv.DictReader(io.StringIO(text)) if r["model"] == PARTIAL)
    assert (got_csv["TESTS_FAILED"], got_csv["missing"], got_csv["total"]) == ("5", "10", "10")

    # Attempt lists: ?reason=TESTS_FAILED lists the 5 failures only; ?outcome=missing the 10.
    listing = reverse("suite-attempts", args=[suite.name])
    slug = run.model_config.slug
    failed = client.get(listing, {"models": slug, "reason": "TESTS_FAILED"}).context["page"]
    assert failed.paginator.count == 5
    missing = client.get(listing, {"models": slug, "outcome": "missing"}).context["page"]
    assert missing.paginator.count == 10
    api = client.get("/api/attempts", {"run": str(run.public_id), "failure_reason": "TESTS_FAILED"})
    assert api.json()["count"] == 5


def test_a_strict_subset_of_a_run_compares_equal_over_exactly_the_shared_tasks(
    client,
    partial_suite,
):
    full, partial = run_of(FULL), run_of(PARTIAL)
    keys = [f"{r.model_config.slug}@{str(r.public_id)[:8]}" for r in (partial, full)]
    compare = reverse("suite-compare", args=[partial_suite.name])
    page = client.get(compare, {"models": ",".join(keys)})
    (pair,) = page.context["comparison"].pairs
    shared = set(PARTIAL_IDS)
    assert (pair.p_value, pair.paired, pair.test.exact) == (1.0, 10, True)
    assert (pair.test.only_a, pair.test.only_b) == (0, 10) and pair.coverage_differs
    assert not pair.fixed_by_b and not pair.regressed
    assert {r.task_id for r in pair.both + pair.neither} == shared
    body = page.content.decode()
    assert "Coverage differs: 0 tasks attempted only by" in body
    # The 10 tasks the subset never attempted are "not attempted" cells, not failures.
    rows = {r.task_id: r for r in page.context["comparison"].rows}
    for task_id, r in rows.items():
        assert (r.cells[0].outcome == "missing") is (task_id not in shared)
        assert r.cells[0].reason == "" or task_id in shared
    for data in (
        client.get("/api/compare", {"suite": partial_suite.name, "models": ",".join(keys)}).json(),
        client.get(compare, {"models": ",".join(keys), "format": "json"}).json(),
    ):
        (p,) = data["pairs"]
        assert (p["p_value"], p["paired"], p["only_a"], p["only_b"]) == (1.0, 10, 0, 10)
        assert p["coverage_differs"] and not p["fixed_by_b"] and not p["regressed"]
    text = client.get(compare, {"models": ",".join(keys), "format": "csv"}).content.decode()
    label = page.context["comparison"].entries[0].label
    for row in csv.DictReader(io.StringIO(text)):
        cell = (row[f"{label}:outcome"], row[f"{label}:reason"], row[f"{label}:scored"])
        if row["task_id"] in shared:
            assert cell[0] in ("resolved", "failed") and cell[2] == "1"
        else:
            assert cell == ("missing", "", "0")


def test_an_attempts_cost_reads_the_same_on_its_page_the_api_and_the_csv(client, bob, k3_suite):
    """Priced by class, unknown (never $0) and reported: the attempt page, /api/attempts/<id>,
    and the attempt list's CSV export agree (all read ``ShownUsage``)."""
    client.force_login(bob)  # a reader: the attempt's own API answer is not anonymous
    priced = Attempt.objects.filter(cost_basis=CostBasis.PRICED, sample_index=2).first()
    unknown = Attempt.objects.get(cost_basis=CostBasis.UNKNOWN)
    reported = Attempt.objects.filter(cost_basis=CostBasis.REPORTED).first()
    export = client.get(
        reverse("suite-attempts", args=[k3_suite.name]), {"format": "csv"}
    ).streaming_content
    by_id = {row["attempt"]: row for row in csv.DictReader(io.StringIO(b"".join(export).decode()))}
    for attempt in (priced, unknown, reported):
        usage = attempt.usage
        page = client.get(reverse("attempt-detail", args=[attempt.public_id])).content.decode()
        cell = re.search(r'<dd id="attempt-cost">(.*?)</dd>', page, re.S).group(1)
        api = client.get(f"/api/attempts/{attempt.public_id}").json()
        row = by_id[str(attempt.public_id)]
        assert api["cost_usd"] == usage.cost_usd
        assert close(float(row["cost_usd"]) if row["cost_usd"] else None, usage.cost_usd)
        for name, value in usage.cost_record().items():
            assert api[name] == value, name
            got = row[name]
            if isinstance(value, str | type(None)):
                assert (got or None) == value, name
            else:
                assert close(float(got), value), name
        assert api["cost_basis"] == attempt.cost_basis
        if usage.has_breakdown:
            assert f"cache read {usd(usage.cost_breakdown['cache_read'])}" in cell
    assert unknown.usage.cost_usd is None
    page = client.get(reverse("attempt-detail", args=[unknown.public_id])).content.decode()
    assert re.search(r'<dd id="attempt-cost">unknown <span[^>]*>\(1 of 2 model calls', page)
    shown = re.search(r'<dd id="attempt-cost">(.*?)</dd>', page, re.S).group(1)
    assert "$" not in shown.split("<div")[0]  # the figure is "unknown"; the classes follow
    page = client.get(reverse("attempt-detail", args=[reported.public_id])).content.decode()
    assert "reported by the imported run" in page
