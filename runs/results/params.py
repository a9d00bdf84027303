"""The one set of query parameter names of the results pages and their API endpoints.

A page and its endpoint take the same names for the same thing (``/suites/<s>/leaderboard/``
and ``/api/leaderboard``, ``compare``, ``taxonomy``, ``/suites/<s>/attempts/`` and
``/api/attempts``): the pages read these tuples, the API's query schemas declare the same
fields (``tests/runs/results/test_reader_params.py`` compares them). Earlier names still work: a
page answers them with a redirect to its canonical URL, the API takes them as deprecated aliases.
A name that is neither is never ignored in silence: a page shows a notice, the API answers 422.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping

LEADERBOARD = (
    "view",
    "runs",
    "labels",
    "date_from",
    "date_to",
    "include_undated",
    "count_out_flagged",
    "sort",
    "order",
    "format",
)
COMPARE = ("models", "labels", "only", "format")
TAXONOMY = ("models", "include_undated", "format")
ATTEMPTS = (
    "models",
    "runs",
    "labels",
    "repo",
    "outcome",
    "reason",
    "status",
    "task",
    "q",
    "is_infra",
    "resolved",
    "attempted",
    "sort",
    "order",
    "page",
    "page_size",
    "format",
)
# The attempt list's filter and order without its paging and format: what an attempt page's
# previous / next links carry.
ATTEMPT_FILTER = tuple(p for p in ATTEMPTS if p not in ("page", "page_size", "format"))

# Earlier names -> the canonical one. Pages redirect (301), the API reads them as deprecated
# aliases. ``descending`` (API, true/false) became ``order`` (asc/desc).
OLD_NAMES = {
    "label": "labels",
    "from": "date_from",
    "to": "date_to",
    "undated": "include_undated",
    "model": "models",
    "run": "runs",
    "failure_reason": "reason",
    "task_id": "task",
    "descending": "order",
}
# Multi-valued parameters: repeated (a form's checkboxes) or comma-separated, both read.
LISTS = ("labels", "models", "runs")
TRUE = ("1", "true", "yes", "on")
FALSE = ("0", "false", "no", "off")


def date_order_problem(date_from: dt.date | None, date_to: dt.date | None) -> str | None:
    """The API's and the pages' one check across two dates, as both word it."""
    if date_from and date_to and date_from > date_to:
        return "date_to: must not be before date_from"
    return None


def split_values(values: Iterable[str]) -> list[str]:
    """``["a,b", "c"]`` -> ``["a", "b", "c"]``: repeated and comma-separated alike, in order,
    empty items and repeats dropped."""
    out: list[str] = []
    for value in values:
        for item in value.split(","):
            item = item.strip()
            if item and item not in out:
                out.append(item)
    return out


def canonical_query(
    params: Mapping[str, list[str]], allowed: Iterable[str]
) -> list[tuple[str, str]] | None:
    """The query with every old name of ``allowed`` renamed, or None when it has none.

    ``params`` maps a name to its values (``QueryDict.lists()``). Several old and new values
    of a list parameter are joined; a scalar's canonical value wins over its old one.
    """
    allowed = tuple(allowed)
    renamed = {old: new for old, new in OLD_NAMES.items() if new in allowed and old in params}
    if not renamed:
        return None
    merged: dict[str, list[str]] = {}
    for name, values in params.items():
        target = renamed.get(name, name)
        if name == "descending":
            values = [_order_of(v) for v in values]
        if target in LISTS:
            merged.setdefault(target, [])
            merged[target] = split_values([*merged[target], *values])
        elif name == target or target not in params:
            merged[target] = [v for v in values if v != ""][-1:] or values[-1:]
    query = []
    for name, values in merged.items():
        if name in LISTS:
            if values:
                query.append((name, ",".join(values)))
        else:
            query += [(name, v) for v in values]
    return query


def _order_of(descending: str) -> str:
    value = descending.strip().lower()
    return "desc" if value in TRUE else "asc" if value in FALSE else descending


def unknown(params: Iterable[str], allowed: Iterable[str]) -> list[str]:
    """The names in ``params`` that neither ``allowed`` nor an old name of it covers."""
    allowed = set(allowed)
    old = {o for o, new in OLD_NAMES.items() if new in allowed}
    return [p for p in params if p not in allowed and p not in old]


def unknown_notice(names: list[str], allowed: Iterable[str]) -> str:
    """The page's notice for parameters it does not know (they are not applied)."""
    listed = ", ".join(repr(n) for n in names)
    return (
        f"Not a parameter of this page, not applied: {listed}. "
        f"This page takes {', '.join(allowed)}."
    )


def flag(value: str | None) -> bool | None:
    """A page's boolean parameter: 1/true/yes/on, 0/false/no/off, else None (not valid)."""
    if value is None:
        return None
    text = value.strip().lower()
    return True if text in TRUE else False if text in FALSE else None
