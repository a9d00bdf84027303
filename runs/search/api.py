"""``GET /api/search``: the transcript search as JSON or CSV (``runs.search.query``).

Readers only (``runs.read_artifacts``), as the transcripts themselves: a hit's snippet is a
piece of one.
"""

from __future__ import annotations

from typing import Literal

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from ninja import Field, Query, Router, Schema

from benchsite.accounts.access import can_read_artifacts
from benchsite.accounts.auth import ARTIFACT_READ
from benchsite.api.common import Text, refuse_unknown_params
from benchsite.api.errors import ApiInputError, ErrorOut
from runs.exports import streamed
from runs.search.query import (
    DEFAULT_PAGE_SIZE,
    EXPORT_COLUMNS,
    MAX_PAGE_SIZE,
    MAX_QUERY_CHARS,
    SearchError,
    SearchQuery,
    export_records,
    transcript_search,
)

router = Router(tags=["search"])


class SearchIn(Schema):
    """The search's parameters, the API's and the page's (``runs.web.query.page_query``)."""

    q: Text = Field(
        min_length=1,
        max_length=MAX_QUERY_CHARS,
        description='words and "quoted phrases", all of which must match; nothing else is syntax',
    )
    suite: Text = Field("", max_length=100, description="a suite's name")
    run: Text = Field("", max_length=100, description="a run id or its first 8+ characters")
    model: Text = Field("", max_length=200, description="a model configuration's name or slug")
    outcome: Literal["", "resolved", "failed", "missing", "infra", "pending", "not_evaluated"] = ""
    task: Text = Field("", max_length=300, description="a task id, exactly")
    page: int = Field(1, ge=1, le=1_000_000)
    page_size: int = Field(DEFAULT_PAGE_SIZE, ge=1, le=MAX_PAGE_SIZE)
    format: Literal["json", "csv"] = "json"

    def search_query(self) -> SearchQuery:
        return SearchQuery(
            text=self.q,
            suite=self.suite.strip(),
            run=self.run.strip(),
            model=self.model.strip(),
            outcome=self.outcome,
            task=self.task.strip(),
            page=self.page,
            page_size=self.page_size,
        )


class HitOut(Schema):
    attempt: str = Field(description="the attempt's public id")
    run: str
    suite: str
    model: str
    task: str
    outcome: str
    step: int = Field(description="the turn's index in the transcript (the page's #turn-<step>)")
    kind: str = Field(description="message, tool_call or tool_output")
    role: str
    snippet: str = Field(description="the matching text around the match, plain")
    snippet_html: str = Field(description="the same, HTML-escaped, matches in <mark>")
    url: str = Field(description="the attempt page at the step")


class SearchOut(Schema):
    total: int = Field(description="hits (documents: messages, tool calls, tool outputs)")
    page: int
    page_size: int
    pages: int
    terms: list[str] = Field(description="the words and phrases searched for")
    hits: list[HitOut]


@router.get(
    "/search",
    response={200: SearchOut, 401: ErrorOut, 403: ErrorOut, 404: ErrorOut, 422: ErrorOut},
    auth=ARTIFACT_READ,
    url_name="transcript_search",
    summary="Search every attempt's transcript: messages, tool calls and tool outputs",
    description="Full-text search over the transcripts, newest attempt first, steps in order. "
    "Filters: suite, run, model, outcome, task. `format=csv` gives every hit (up to 10,000) "
    "as the page's and `ab search --csv`'s CSV. Readers only (runs.read_artifacts).",
)
def search(request: HttpRequest, query: Query[SearchIn]):
    refuse_unknown_params(request, SearchIn)
    if not can_read_artifacts(request.user):
        raise PermissionDenied(
            "searching transcripts needs the readers group (runs.read_artifacts)"
        )
    wanted = query.search_query()
    try:
        if query.format == "csv":
            transcript_search(wanted)  # a bad filter is a 4xx before the download starts
            return streamed("csv", "search", EXPORT_COLUMNS, export_records(wanted), head={})
        found = transcript_search(wanted)
    except SearchError as exc:
        status = 404 if exc.not_found else 422
        raise ApiInputError(exc.field, exc.message, status=status, location="query") from None
    return {
        "total": found.total,
        "page": wanted.page,
        "page_size": wanted.page_size,
        "pages": found.pages,
        "terms": found.terms,
        "hits": found.hits,
    }
