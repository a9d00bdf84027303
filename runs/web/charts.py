"""Chart data as JSON, fetched by ``static/js/charts.js`` once a chart scrolls into view.

The page itself carries no chart data and no plotly.js (4.8 MB): both come only when a chart
is about to be seen, once per page however many charts share them.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import reverse

from runs.results.params import TAXONOMY, unknown, unknown_notice
from runs.results.taxonomy_report import chart_data
from runs.web.query import old_names_redirect
from runs.web.results import _suite_for, taxonomy_request


def taxonomy_chart(request: HttpRequest, name: str) -> HttpResponse:
    """The taxonomy page's bars and lines (``runs.results.taxonomy_report.chart_data``)."""
    suite = _suite_for(request, name)
    if isinstance(suite, HttpResponse):
        return suite
    moved = old_names_redirect(request, TAXONOMY)
    if moved:
        return moved
    unknown_names = unknown(request.GET.keys(), TAXONOMY)
    if unknown_names:
        return JsonResponse({"detail": unknown_notice(unknown_names, TAXONOMY)}, status=400)
    attempts_url = reverse("suite-attempts", args=[suite.name])
    # Runs of unknown date (imported without one) join the over-time lines only when asked;
    # the page's ``models`` and ``include_undated``, read the same way.
    errors: list[str] = []
    breakdown, _, _ = taxonomy_request(request, suite, errors)
    if errors:
        return JsonResponse({"detail": "; ".join(errors)}, status=400)
    return JsonResponse(chart_data(breakdown, attempts_url))
