"""Static files as browsers get them: plotly.js gzipped and kept for good, and the favicon."""

from __future__ import annotations

import gzip

from tests.conftest import REPO_ROOT

PLOTLY = REPO_ROOT / "static/vendor/plotly-4.1.1.min.js"


def test_plotly_is_sent_gzipped_and_cached_as_immutable(client):
    response = client.get("/static/vendor/plotly-4.1.1.min.js", HTTP_ACCEPT_ENCODING="gzip")
    assert response.status_code == 200
    assert response["Content-Encoding"] == "gzip"
    assert "immutable" in response["Cache-Control"]
    body = b"".join(response.streaming_content)
    assert len(body) < PLOTLY.stat().st_size / 3
    # The compressed copy is the same file, not a stale one (regenerate it with gzip -9 -n -k).
    assert gzip.decompress(body) == PLOTLY.read_bytes()
    plain = client.get("/static/vendor/plotly-4.1.1.min.js")
    assert "Content-Encoding" not in plain
    # Our own files change with the code: not kept for good.
    assert "immutable" not in client.get("/static/js/charts.js").get("Cache-Control", "")


def test_the_favicon_is_served(client):
    redirect = client.get("/favicon.ico")
    assert redirect.status_code == 301 and redirect["Location"] == "/static/favicon.svg"
    icon = client.get("/static/favicon.svg")
    assert icon.status_code == 200
    assert b"<svg" in b"".join(icon.streaming_content)
