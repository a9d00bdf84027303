"""``/search/``: the transcript search page, over the service the API and ``ab search`` use.

Parameters are read with the API's schema (``runs.search.api.SearchIn`` through
``runs.web.query.page_query``): the same names, limits and error words. Readers only: a
visitor is sent to the login page, an account that is no reader gets 403.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from benchsite.accounts.access import can_read_artifacts
from runs.results.selection import OUTCOMES
from runs.search.api import SearchIn
from runs.search.query import SearchError, SearchPage, transcript_search
from runs.web.query import page_query, unknown_params
from tasks_app.models import Suite

PARAMS = ("q", "suite", "run", "model", "outcome", "task", "page", "page_size")


def search_page(request: HttpRequest) -> HttpResponse:
    if not can_read_artifacts(request.user):
        if request.user.is_authenticated:
            raise PermissionDenied("Searching transcripts needs the readers group.")
        return redirect_to_login(request.get_full_path())
    errors: list[str] = []
    found: SearchPage | None = None
    values = {n: request.GET.get(n, "").strip() for n in PARAMS}
    if values["q"]:
        params = page_query(request, SearchIn, PARAMS, fixed={}, errors=errors)
        try:
            found = transcript_search(params.search_query())
        except SearchError as exc:
            errors.append(f"{exc.field}: {exc.message}")
    query = [(n, values[n]) for n in PARAMS if values[n] and n != "page"]
    page_number = found.query.page if found else 1
    context = {
        "values": values,
        "errors": errors,
        "notices": unknown_params(request, PARAMS),
        "found": found,
        "suites": Suite.objects.order_by("name").values_list("name", flat=True),
        "outcomes": OUTCOMES,
        "page_query": urlencode(query),
        "previous_page": page_number - 1 if found and page_number > 1 else None,
        "next_page": page_number + 1 if found and page_number < found.pages else None,
        "csv_url": reverse("api:transcript_search") + "?" + urlencode([*query, ("format", "csv")]),
    }
    return render(request, "runs/search.html", context, status=400 if errors else 200)
