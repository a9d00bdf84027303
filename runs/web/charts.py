"""Chart data as JSON, fetched by ``static/js/charts.js`` once a chart scrolls into view.

The page itself carries no chart data and no plotly.js (4.8 MB): both come only when a chart
is about to be seen, once per page however many charts share them.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import reverse

from runs.results.taxonomy_report import chart_data, taxonomy_breakdown
from runs.web.results import _suite_for


def taxonomy_chart(request: HttpRequest, name: str) -> HttpResponse:
    """The taxonomy page's bars and lines (``runs.results.taxonomy_report.chart_data``)."""
    suite = _suite_for(request, name)
    if isinstance(suite, HttpResponse):
        return suite
    attempts_url = reverse("suite-attempts", args=[suite.name])
    # Runs of unknown date (imported without one) join the over-time lines only when asked.
    undated = request.GET.get("undated") == "1"
    breakdown = taxonomy_breakdown(suite=suite, include_undated=undated)
    return JsonResponse(chart_data(breakdown, attempts_url))
