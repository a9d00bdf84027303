"""The results pages' query parameters: old names answered with a redirect to the canonical URL,
names a page does not know named in a notice (``runs.results.params`` holds the names)."""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponsePermanentRedirect

from runs.results.params import canonical_query, unknown, unknown_notice


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
