"""The leaderboard's rows and the compare page's bucket lists as HTML, built in Python.

Built here rather than in templates for the reason ``runs.web.results.matrix_html`` is: a
results page renders after every write during a live run (the page cache misses), and the
template engine's per-variable and per-filter cost for 30 rows of 15 cells, or 500 bucket
entries, was a quarter of the page's time. Every string from data (names, keys, slugs, run
ids, task ids, URLs) goes through ``html.escape``; numbers are formatted by the same filters
the templates use (``runs.templatetags.results``), so the page reads the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape as esc

from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe

from runs.templatetags.results import kilo, pct, pvalue, secs, tenths, usd

DASH = "\u2013"  # an en dash between the bounds of an interval, as the templates print it
_MISSING_TITLE = "instances never attempted: 0 in the whole-suite rate, out of the attempted rate"


def _day(value) -> str:
    return timezone.localtime(value).strftime("%Y-%m-%d") if value else ""


# The usage columns, in the table's order: (sort key, row attribute, heading, title, format).
USAGE_COLUMNS = (
    ("mean_cost", "mean_cost_usd", "Cost / attempt", "", usd),
    ("mean_tokens", "mean_tokens", "Tokens / attempt", "", kilo),
    ("mean_calls", "mean_calls", "Calls / attempt", "model API calls per attempt that ran", tenths),
    ("mean_wall", "mean_wall_sec", "Wall / attempt", "", secs),
    ("cost_per_resolved", "cost_per_resolved_usd", "Cost / resolved", "", usd),
)


def usage_columns(rows: list) -> list[tuple]:
    """The usage columns some row has a figure for: a column that would read "—" in every
    row (published results record no cost, tokens, calls or wall) is left out."""
    return [
        c
        for c in USAGE_COLUMNS
        if any(
            getattr(r, c[1]) is not None or (c[0] == "mean_cost" and r.cost_unknown_attempts)
            for r in rows
        )
    ]


# The cost classes as the cost cell names them (runs/pricing.py).
COST_CLASS_LABELS = (
    ("input", "input"),
    ("cache_write", "cache write"),
    ("cache_read", "cache read"),
    ("output", "output"),
)


def cost_cell(r) -> str:
    """The cost per attempt, its breakdown by class, and what it leaves out: attempts whose
    cost is unknown (never counted as $0) or only reported by an imported run."""
    mean = r.mean_cost_usd
    shown = "unknown" if mean is None and r.cost_unknown_attempts else usd(mean)
    lines = []
    breakdown = r.mean_cost_breakdown
    if any(v is not None for v in breakdown.values()):
        parts = " · ".join(f"{label} {usd(breakdown[k])}" for k, label in COST_CLASS_LABELS)
        lines.append(f'<div class="small muted cost-classes">{parts}</div>')
    if r.cost_unknown_attempts:
        lines.append(
            '<div class="small muted cost-unknown" title="a price is missing: see the '
            f'attempts">{r.cost_unknown_attempts} unknown</div>'
        )
    if r.cost_reported_attempts:
        lines.append(
            '<div class="small muted cost-reported" title="the imported run\'s own figure">'
            f"{r.cost_reported_attempts} reported</div>"
        )
    return f'<td class="num cost">{shown}{"".join(lines)}</td>'


def _usage_cell(r, attr: str, fmt) -> str:
    if attr == "mean_cost_usd":
        return cost_cell(r)
    return f'<td class="num">{fmt(getattr(r, attr))}</td>'


def leaderboard_rows_html(
    rows: list, *, any_k: bool, columns: Sequence[tuple] = USAGE_COLUMNS
) -> SafeString:
    """The <tr> of each leaderboard row (``runs.results.leaderboard.LeaderboardRow``, with the
    ``links`` the view set); ``columns``: the usage columns shown (``usage_columns``)."""
    return mark_safe("\n".join(_row(r, any_k, columns) for r in rows))


def _meta(r) -> str:
    """The row's configuration and run on one compact line under its name."""
    links = r.links
    parts = [f'<a href="{esc(links.config)}">{esc(r.agent_variant)}</a>']
    if r.condition:
        parts.append(
            '<span class="condition" title="condition: the files this configuration adds to '
            f'the workspace">condition {esc(r.condition)}</span>'
        )
    if r.run is not None:
        run = r.run
        parts.append(f'<a href="{esc(links.run)}">run {esc(run.short_id)}</a>')
        parts.append(
            _day(r.date)
            if r.date
            else '<span class="undated" title="its source says nothing of when it ran">'
            f"imported on {_day(r.imported_on)}</span>"
        )
        if run.samples > 1:
            parts.append(f"k={run.samples}")
        if r.is_published:
            parts.append(
                '<span title="imported published results, graded elsewhere">published</span>'
            )
        elif run.source != "harness":
            parts.append(esc(run.source))
        parts.append(
            f'<a href="{esc(links.run_attempts)}" title="its attempts, logs and trajectories">'
            "attempts</a>"
        )
    else:
        count = r.run_count
        if r.is_published:
            parts.append(
                '<span title="imported published results, graded elsewhere">published</span>'
            )
        parts.append(f"{count} run{'' if count == 1 else 's'}")
        parts += [f'<a href="{esc(url)}">{esc(short)}</a>' for url, short in links.runs]
    items = "".join(f"<span>{p}</span>" for p in parts)
    return f'<div class="small muted run-links meta">{items}</div>'


def _row(r, any_k: bool, columns: Sequence[tuple]) -> str:
    s, links = r.score, r.links
    slug, key = esc(r.slug), esc(r.key)
    ci = f"{pct(r.ci_low)} {DASH} {pct(r.ci_high)}" if r.ci_low is not None else "—"
    bar = ""
    if r.rate is not None:
        bar = (
            f'<div class="bar" title="{pct(r.rate)}"><span style="width: '
            f'{pct(r.rate, 0).rstrip("%")}%"></span></div>'
        )
    attempted_ci = (
        f' · <span class="ci">{pct(s.attempted_ci_low)} {DASH} {pct(s.attempted_ci_high)}</span>'
        if s.attempted_ci_low is not None and s.partial
        else ""
    )
    cells = [
        f'<tr data-model="{slug}" data-key="{key}" class="{esc(r.status)}">',
        f'<td class="num">{r.rank or ""}</td>',
        f'<td class="name"><a class="model-link" href="{esc(links.attempts)}" '
        f'title="{esc(r.name)}">{esc(r.name)}</a>{_meta(r)}</td>',
        f'<td class="num"><strong>{pct(r.rate)}</strong>'
        f'<div class="small muted score-count">{esc(s.resolved_label)}</div></td>',
        f'<td><span class="ci">{ci}</span>{bar}</td>',
        f'<td class="num attempted">{pct(s.attempted_rate)}'
        f'<div class="small muted"><span class="attempted-count">{esc(s.attempted_label)}</span>'
        f"{attempted_ci}</div></td>",
    ]
    if any_k:
        pk = (
            f'{pct(r.pass_at_k)} <span class="small muted">k={r.k}</span>'
            if r.pass_at_k is not None
            else "—"
        )
        cells.append(f'<td class="num">{pk}</td>')
        hat = "—"
        if r.pass_hat_k is not None:
            split = s.disagreeing_tasks
            hat = (
                f'{pct(r.pass_hat_k)}<div class="small muted pass-hat-k" title="tasks whose '
                f'samples disagree (some resolved, some not)">{split} split</div>'
            )
        cells.append(f'<td class="num">{hat}</td>')
    infra = f'<a class="infra" href="{esc(links.infra)}">{r.infra}</a>' if r.infra else "0"
    cells += [f'<td class="num">{r.attempts}</td>', f'<td class="num">{infra}</td>']
    cells += [_usage_cell(r, attr, fmt) for _, attr, _, _, fmt in columns]
    cells += [f'<td class="standing">{_standing(r)}</td>', "</tr>"]
    return "".join(cells)


def _standing(r) -> str:
    status, p, n = r.status, pvalue(r.p_value_vs_leader), r.paired_vs_leader
    s = r.score
    if status == "leader":
        text = '<span class="badge resolved">leader</span>'
    elif status == "tied":
        text = (
            f'<span class="badge tied" title="paired test vs the leader over the {n} tasks both '
            f'attempted: {p}">tied</span> <span class="small muted">{p}, n = {n}</span>'
        )
    elif status == "behind":
        text = (
            '<span class="small muted" title="paired test vs the leader over the tasks both '
            f'attempted">{p}, n = {n}</span>'
        )
    elif status == "partial":
        # Ranked by its whole-suite rate, compared on the tasks both attempted: no tie claimed
        # either way; the paired comparison is the compare page's, one click away.
        text = (
            f'<span class="badge coverage" title="attempted {s.attempted_tasks} of the '
            f'{s.tasks} tasks it is rated over: no tie with the leader claimed">partial: '
            f"{s.attempted_tasks} of {s.tasks} tasks</span>"
        )
    elif status == "pending":
        waiting = f", {r.not_evaluated} not evaluated" if r.not_evaluated else ""
        text = (
            '<span class="badge pending" title="not ranked until every attempt is final">'
            f"{r.pending} pending{waiting}</span>"
        )
    elif status == "reference":
        text = '<span class="small muted">reference</span>'
    else:
        text = '<span class="small muted">nothing scored</span>'
    line = []
    if r.missing:
        line.append(
            f'<span class="missing-count" title="{_MISSING_TITLE}">'
            f"{r.missing} of {r.tasks} not attempted</span>"
        )
    if s.flagged:
        counted = "counted as failures" if s.flagged_counted_out else "counted as successes"
        line.append(
            f'<span class="flagged-count" data-flagged="{s.flagged}" title="successes carrying '
            f'an integrity flag, {counted}">{s.flagged} flagged</span>'
        )
    if status == "partial" and r.links.compare_leader:
        line.append(
            f'<a class="compare-leader" href="{esc(r.links.compare_leader)}" '
            f'title="the paired test over the {n} tasks both attempted: {p}">'
            f"vs leader on the {n} shared</a>"
        )
    if line:
        text += f'<div class="small">{" · ".join(line)}</div>'
    if r.coverage_differs_from_leader and status != "partial":
        text += (
            ' <div class="small coverage-warning" title="this row and the leader did not '
            f'attempt the same tasks: the test covers only the {n} both attempted">coverage '
            "differs from the leader's</div>"
        )
    return text


def task_list_html(rows: list) -> SafeString:
    """A bucket's tasks as <li> links (``runs.results.compare.TaskRow`` with ``url`` set)."""
    if not rows:
        return mark_safe('<li class="muted">none</li>')
    return mark_safe("".join(f'<li><a href="{esc(r.url)}">{esc(r.task_id)}</a></li>' for r in rows))
