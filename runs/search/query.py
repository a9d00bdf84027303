"""The search: a text and filters in, one page of hits out, the same for every surface.

The page (``/search/``), the API (``GET /api/search``, JSON and CSV) and ``ab search`` all
call ``transcript_search``, so a query gives the same total and the same hits everywhere.

The text is never handed to the database's query syntax: it is split into words and
``"quoted phrases"``, each passed as a quoted FTS5 string (SQLite) or through
``phraseto_tsquery`` (PostgreSQL), and all must match. Quotes, ``NEAR``, ``*``, parentheses and
``-`` are then plain characters. Snippets come from the database's highlighter with private-use
markers (``runs.search.index.MARK_START``), are HTML-escaped, and only then get ``<mark>``.
"""

from __future__ import annotations

import html
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

from django.db import connection
from django.urls import reverse

from runs.models import Attempt
from runs.results.attempt_list import AttemptFilters, FilterError, filtered
from runs.search.index import MARK_END, MARK_START
from runs.search.models import PG_DOCUMENT, PG_SPACED, PG_SPLIT
from tasks_app.models import Suite

MAX_QUERY_CHARS = 500
MAX_TERMS = 16  # words and phrases of one query; more are a query no index answers fast
MAX_PAGE_SIZE = 200
DEFAULT_PAGE_SIZE = 50
SNIPPET_TOKENS = 24  # FTS5's snippet length in tokens; ts_headline's MaxWords matches it
_TERM = re.compile(r'"([^"]*)"|(\S+)')
_WORD = re.compile(r"\w")


class SearchError(ValueError):
    """A parameter no search can use; ``field`` names it (the API's 422, the page's 400)."""

    def __init__(self, field: str, message: str, *, not_found: bool = False):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
        self.not_found = not_found


@dataclass(frozen=True)
class SearchQuery:
    text: str
    suite: str = ""
    run: str = ""  # a run id prefix, 8+ characters
    model: str = ""  # a configuration's name, slug or public id
    outcome: str = ""  # runs.results.selection.OUTCOMES
    task: str = ""  # a task id, exactly
    page: int = 1
    page_size: int = DEFAULT_PAGE_SIZE


@dataclass(frozen=True)
class Hit:
    attempt: str  # the attempt's public id
    run: str
    suite: str
    model: str
    task: str
    outcome: str
    step: int
    kind: str
    role: str
    snippet: str  # plain text
    snippet_html: str  # escaped, matches in <mark>
    url: str  # the attempt page at the step: /attempts/<id>/#turn-<step>


@dataclass
class SearchPage:
    query: SearchQuery
    terms: list[str]
    total: int = 0
    hits: list[Hit] = field(default_factory=list)

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.query.page_size))


def terms_of(text: str) -> list[str]:
    """The words and quoted phrases of ``text`` that hold a letter or digit (the rest cannot
    match a token), at most ``MAX_TERMS``."""
    text = "".join(c if c.isprintable() else " " for c in text[:MAX_QUERY_CHARS])
    terms = []
    for phrase, word in _TERM.findall(text):
        term = " ".join((phrase or word).split())
        if _WORD.search(term):
            terms.append(term)
    return terms[:MAX_TERMS]


def transcript_search(query: SearchQuery) -> SearchPage:
    """The hits of ``query``, paginated: the attempt indexed last first, each attempt's in step
    order (``runs.search.index`` writes an attempt's rows last step first; hits go by row id,
    descending, which the full-text index reads without sorting).
    Raises ``SearchError`` for a filter naming nothing (an unknown suite, model or run) or a
    value no attempt can have. Read rights are the caller's: this reads every transcript."""
    if query.page < 1 or not 1 <= query.page_size <= MAX_PAGE_SIZE:
        raise SearchError("page", f"page from 1, page_size from 1 to {MAX_PAGE_SIZE}")
    result = SearchPage(query=query, terms=terms_of(query.text))
    attempts = _attempts(query)
    if not result.terms:
        return result
    backend = _postgres if connection.vendor == "postgresql" else _sqlite
    sql_from, params = backend(result.terms)
    if attempts is not None:
        subquery, sub_params = attempts.order_by().values("id").query.sql_with_params()
        sql_from += f" AND d.attempt_id IN ({subquery})"
        params += list(sub_params)
    with connection.cursor() as cursor:
        if attempts is None and connection.vendor != "postgresql":
            # No filter: FTS5 counts its matches without reading the rows.
            sql_count, count_params = _sqlite_count(result.terms)
            cursor.execute(sql_count, count_params)
        else:
            cursor.execute(f"SELECT count(*) {sql_from}", params)
        result.total = cursor.fetchone()[0]
        offset = (query.page - 1) * query.page_size
        if result.total <= offset:
            return result
        snippet = _snippet_sql(result.terms)
        order = "d.id" if connection.vendor == "postgresql" else "f.rowid"
        cursor.execute(
            f"SELECT d.id, d.attempt_id, d.step, d.kind, d.role, {snippet} {sql_from} "
            f"ORDER BY {order} DESC LIMIT %s OFFSET %s",
            [*_snippet_params(result.terms), *params, query.page_size, offset],
        )
        rows = cursor.fetchall()
    result.hits = _hits(rows)
    return result


def _attempts(query: SearchQuery):
    """The attempts the filters allow (a queryset), or None when nothing filters."""
    suite = None
    if query.suite:
        suite = Suite.objects.filter(name=query.suite).first()
        if suite is None:
            raise SearchError("suite", f"no suite named {query.suite!r}", not_found=True)
    filters = AttemptFilters(
        models=(query.model,) if query.model else (),
        runs=(query.run,) if query.run else (),
        outcome=query.outcome,
        task=query.task,
    )
    if suite is None and not filters.active:
        return None
    try:
        return filtered(suite=suite, filters=filters, read_errors=False)
    except FilterError as exc:
        name = {"models": "model", "runs": "run"}.get(exc.field, exc.field)
        raise SearchError(name, exc.message, not_found=exc.not_found) from None


# --- the two backends: FROM ... WHERE, with the text's terms as parameters -------------------


def _fts_match(terms: list[str]) -> str:
    # Each term an FTS5 string ("" doubles a quote): a phrase of its tokens, never syntax.
    return " ".join('"' + t.replace('"', '""') + '"' for t in terms)


def _sqlite(terms: list[str]) -> tuple[str, list]:
    return (
        "FROM runs_transcript_fts f JOIN runs_transcript_document d ON d.id = f.rowid "
        "WHERE runs_transcript_fts MATCH %s",
        [_fts_match(terms)],
    )


def _sqlite_count(terms: list[str]) -> tuple[str, list]:
    return (
        "SELECT count(*) FROM runs_transcript_fts WHERE runs_transcript_fts MATCH %s",
        [_fts_match(terms)],
    )


def _tsquery(terms: list[str]) -> str:
    # Each term a phrase of its words, its punctuation set apart as the documents' is.
    term = "phraseto_tsquery('simple', " + PG_SPACED.format("%s") + ")"
    return " && ".join([term] * len(terms))


def _postgres(terms: list[str]) -> tuple[str, list]:
    document = PG_DOCUMENT.replace("(text,", "(d.text,")
    return (
        f"FROM runs_transcript_document d WHERE {document} @@ ({_tsquery(terms)})",
        list(terms),
    )


def _snippet_sql(terms: list[str]) -> str:
    if connection.vendor == "postgresql":
        options = (
            f'StartSel="{MARK_START}", StopSel="{MARK_END}", MaxWords={SNIPPET_TOKENS}, '
            'MinWords=8, MaxFragments=1, FragmentDelimiter=" … "'
        )
        text = PG_SPACED.format("d.text")
        return f"ts_headline('simple', {text}, ({_tsquery(terms)}), '{options}')"
    return f"snippet(runs_transcript_fts, 0, '{MARK_START}', '{MARK_END}', '…', {SNIPPET_TOKENS})"


def _snippet_params(terms: list[str]) -> list[str]:
    return list(terms) if connection.vendor == "postgresql" else []


def _hits(rows: list[tuple]) -> list[Hit]:
    ids = {row[1] for row in rows}
    attempts = {
        a.id: a
        for a in Attempt.objects.filter(id__in=ids)
        .select_related("run", "suite", "model_config", "task")
        .only(
            "id",
            "public_id",
            "status",
            "is_infra",
            "failure_reason_id",
            "run__public_id",
            "suite__name",
            "model_config__name",
            "task__task_id",
        )
    }
    zero = str(uuid.UUID(int=0))
    detail = reverse("attempt-detail", args=[zero])
    hits = []
    for _id, attempt_id, step, kind, role, snippet in rows:
        snippet = snippet.replace(PG_SPLIT, "")
        a = attempts[attempt_id]
        hits.append(
            Hit(
                attempt=str(a.public_id),
                run=str(a.run.public_id),
                suite=a.suite.name,
                model=a.model_config.name,
                task=a.task.task_id,
                outcome=a.outcome,
                step=step,
                kind=kind,
                role=role,
                snippet=snippet.replace(MARK_START, "").replace(MARK_END, ""),
                snippet_html=highlighted(snippet),
                url=detail.replace(zero, str(a.public_id)) + f"#turn-{step}",
            )
        )
    return hits


def highlighted(snippet: str) -> str:
    """The highlighter's output as HTML: escaped first, then its markers become <mark>."""
    return html.escape(snippet).replace(MARK_START, "<mark>").replace(MARK_END, "</mark>")


# The CSV export's columns (the API's ``format=csv``, ``ab search --csv``): a hit's fields.
EXPORT_COLUMNS = (
    "attempt",
    "run",
    "suite",
    "model",
    "task",
    "outcome",
    "step",
    "kind",
    "role",
    "url",
    "snippet",
)
MAX_EXPORT_HITS = 10_000


def export_records(query: SearchQuery) -> Iterator[dict]:
    """Every hit of ``query`` (from its first page, at most ``MAX_EXPORT_HITS``) as a row of
    ``EXPORT_COLUMNS``, read a page at a time."""
    page, seen = 1, 0
    while seen < MAX_EXPORT_HITS:
        found = transcript_search(replace(query, page=page, page_size=MAX_PAGE_SIZE))
        for hit in found.hits[: MAX_EXPORT_HITS - seen]:
            yield {name: getattr(hit, name) for name in EXPORT_COLUMNS}
        seen += len(found.hits)
        if page >= found.pages:
            return
        page += 1
