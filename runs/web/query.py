"""The results pages' query parameters: old names answered with a redirect to the canonical URL,
names a page does not know named in a notice (``runs.results.params`` holds the names), and
the values read with the API's schemas (``page_query``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar, get_origin
from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponsePermanentRedirect
from ninja import Schema
from pydantic import ValidationError

from runs.queries import AttemptListQuery
from runs.results.attempt_list import DEFAULT_PAGE_SIZE, AttemptFilters, FilterError, check
from runs.results.params import ATTEMPT_FILTER, LISTS, canonical_query, unknown, unknown_notice

SchemaT = TypeVar("SchemaT", bound=Schema)


def old_names_redirect(
    request: HttpRequest, allowed: Iterable[str]
) -> HttpResponsePermanentRedirect | None:
    """A 301 to the same page with the canonical names, when the query uses an old one
    (``?label=a&from=2025-01-01`` -> ``?labels=a&date_from=2025-01-01``); else None."""
    query = canonical_query(dict(request.GET.lists()), allowed)
    if query is None:
        return None
    return HttpResponsePermanentRedirect(request.path + ("?" + urlencode(query) if query else ""))


def unknown_params(request: HttpRequest, allowed: Iterable[str]) -> list[str]:
    """A notice naming the parameters the page does not take (left unapplied), or none."""
    allowed = tuple(allowed)
    names = unknown(request.GET.keys(), allowed)
    return [unknown_notice(names, allowed)] if names else []


def page_query(
    request: HttpRequest,
    schema: type[SchemaT],
    allowed: Iterable[str],
    *,
    fixed: dict[str, Any],
    errors: list[str],
) -> SchemaT:
    """The page's query read with the API's schema: the same names, defaults, checks and
    messages as the API endpoint that gives the same figures (``runs.api.schemas``).

    Only the ``allowed`` names are read (the others get ``unknown_params``' notice), but
    ``format``: a page answers it with a redirect to the API (``runs.web.results._to_api``).
    ``fixed`` are what the URL's path says (the suite). A blank value is a form's empty field: not
    given. A name of ``LISTS`` the schema takes as one text (``runs``) joins its repeated
    values with commas. A bad value is named in ``errors`` as the API's 422 words it
    ("field: message") and left at its default, so the page still renders (status 400).
    """
    data: dict[str, Any] = {}
    for name in allowed:
        field = schema.model_fields.get(name)
        values = [v for v in request.GET.getlist(name) if v.strip()]
        if field is None or not values or name in fixed or name == "format":
            continue
        if get_origin(field.annotation) is list:
            data[name] = values
        elif name in LISTS:
            data[name] = ",".join(values)
        else:
            data[name] = values[-1]
    data |= fixed
    try:
        return schema.model_validate(data)
    except ValidationError as exc:
        for error in exc.errors():
            name = str(error["loc"][0]) if error["loc"] else ""
            errors.append(f"{name}: {error['msg']}")
            data.pop(name, None)
    return schema.model_validate(data)


def attempt_list_query(request: HttpRequest) -> tuple[AttemptFilters, int]:
    """The attempt list's filter and page size as the page's URL gives them, read with the
    API's ``AttemptListQuery`` (an attempt page's previous / next reads the same names).
    Raises ``FilterError`` naming the first bad value, in the API's words."""
    errors: list[str] = []
    query = page_query(
        request, AttemptListQuery, (*ATTEMPT_FILTER, "page_size"), fixed={}, errors=errors
    )
    if errors:
        field, _, message = errors[0].partition(": ")
        raise FilterError(field, message)
    filters = query.filters()
    check(filters)
    # The page shows 100 rows unless told (the API answers 50): each keeps its default.
    given = "page_size" in query.model_fields_set
    return filters, query.page_size if given else DEFAULT_PAGE_SIZE
