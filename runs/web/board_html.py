"""The leaderboard's rows and the compare page's bucket lists as HTML, built in Python.

Built here rather than in templates for the reason ``runs.web.results.matrix_html`` is: a
results page renders after every write during a live run (the page cache misses), and the
template engine's per-variable and per-filter cost for 30 rows of 15 cells, or 500 bucket
entries, was a quarter of the page's time. Every string from data (names, keys, slugs, run
ids, task ids, URLs) goes through ``html.escape``; numbers are formatted by the same filters
the templates use (``runs.templatetags.results``), so the page reads the same.
"""

from __future__ import annotations

from html import escape as esc

from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe

from runs.templatetags.results import kilo, pct, pvalue, secs, tenths, usd

DASH = "\u2013"  # an en dash between the bounds of an interval, as the templates print it
_MISSING_TITLE = "instances never attempted: 0 in the whole-suite rate, out of the attempted rate"


def _day(value) -> str:
    return timezone.localtime(value).strftime("%Y-%m-%d") if value else ""


def leaderboard_rows_html(rows: list, *, any_k: bool) -> SafeString:
    """The <tr> of each leaderboard row (``runs.results.leaderboard.LeaderboardRow``, with the
    ``links`` the view set)."""
    return mark_safe("\n".join(_row(r, any_k) for r in rows))


def _row(r, any_k: bool) -> str:
    s, links = r.score, r.links
    slug, key = esc(r.slug), esc(r.key)
    variant = f'<a href="{esc(links.config)}">{esc(r.agent_variant)}</a>'
    if r.condition:
        variant += (
            ' · <span class="condition" title="condition: the files this configuration adds to '
            f'the workspace">condition {esc(r.condition)}</span>'
        )
    if r.is_published:
        variant += " · published results"
    if r.missing:
        variant += (
            f' · <span class="missing-count" title="{_MISSING_TITLE}">'
            f"{r.missing} of {r.tasks} not attempted</span>"
        )
    if r.run is not None:
        run = r.run
        when = (
            _day(r.date)
            if r.date
            else '<span class="undated" title="its source says nothing of when it ran">'
            f"imported on {_day(r.imported_on)}</span>"
        )
        source = f" · {esc(run.source)}" if run.source != "harness" else ""
        runs = (
            f'<div class="small run-links"><a href="{esc(links.run)}">run {esc(run.short_id)}</a>'
            f" · {when} · k={run.samples}{source} · "
            f'<a href="{esc(links.run_attempts)}">attempts, logs &amp; trajectories</a></div>'
        )
    else:
        count = r.run_count
        listed = "".join(f' · <a href="{esc(url)}">{esc(short)}</a>' for url, short in links.runs)
        runs = f'<div class="small run-links">{count} run{"" if count == 1 else "s"}{listed}</div>'
    ci = f"{pct(r.ci_low)} {DASH} {pct(r.ci_high)}" if r.ci_low is not None else "—"
    bar = ""
    if r.rate is not None:
        bar = (
            f'<div class="bar" title="{pct(r.rate)}"><span style="width: '
            f'{pct(r.rate, 0).rstrip("%")}%"></span></div>'
        )
    attempted_ci = (
        f"{pct(s.attempted_ci_low)} {DASH} {pct(s.attempted_ci_high)}"
        if s.attempted_ci_low is not None
        else ""
    )
    cells = [
        f'<tr data-model="{slug}" data-key="{key}" class="{esc(r.status)}">',
        f'<td class="num">{r.rank or ""}</td>',
        f'<td><a class="model-link" href="{esc(links.attempts)}">{esc(r.name)}</a>'
        f'<div class="small muted">{variant}</div>{runs}</td>',
        f'<td class="num"><strong>{pct(r.rate)}</strong>'
        f'<div class="small muted score-count">{esc(s.resolved_label)}</div></td>',
        f'<td><span class="ci">{ci}</span>{bar}</td>',
        f'<td class="num attempted">{pct(s.attempted_rate)}'
        f'<div class="small muted attempted-count">{esc(s.attempted_label)}</div>'
        f'<div class="ci">{attempted_ci}</div></td>',
    ]
    if any_k:
        pk = (
            f'{pct(r.pass_at_k)} <span class="small muted">k={r.k}</span>'
            if r.pass_at_k is not None
            else "—"
        )
        cells.append(f'<td class="num">{pk}</td>')
    infra = f'<a class="infra" href="{esc(links.infra)}">{r.infra}</a>' if r.infra else "0"
    cells += [
        f'<td class="num">{r.attempts}</td>',
        f'<td class="num">{infra}</td>',
        f'<td class="num">{usd(r.mean_cost_usd)}</td>',
        f'<td class="num">{kilo(r.mean_tokens)}</td>',
        f'<td class="num">{tenths(r.mean_calls)}</td>',
        f'<td class="num">{secs(r.mean_wall_sec)}</td>',
        f'<td class="num">{usd(r.cost_per_resolved_usd)}</td>',
        f'<td class="standing">{_standing(r)}</td>',
        "</tr>",
    ]
    return "".join(cells)


def _standing(r) -> str:
    status, p, n = r.status, pvalue(r.p_value_vs_leader), r.paired_vs_leader
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
    if r.coverage_differs_from_leader:
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
