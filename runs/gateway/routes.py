"""The gateway's route table: the exact requests it forwards, and the one path each goes to.

A request's target is checked before anything else is read: origin-form only (``/path?query``),
every path segment a plain name (no ``.``/``..`` segments, no empty ones, no percent-encoding,
no ``;``, ``#``, backslash...), then matched exactly (method and path) against ``ROUTES`` under
one of ``PREFIXES``, with only the query parameters that API defines. The upstream path is
rebuilt from the table (``Route.upstream_path``), never taken from the client: an upstream or
CDN that normalises ``/v1/files/models/..`` to ``/v1/files`` never sees such a path, and an
absolute-form target (``http://evil.example/v1/messages``) cannot pick the upstream's Host.

What the CLIs send (their recorded calls are in tests/data/model_calls/): Claude Code
``POST /v1/messages?beta=true`` (the Anthropic base URL is the host, the client adds ``/v1``),
Codex ``POST /responses`` and mini-swe-agent (litellm) ``POST /chat/completions`` (an OpenAI
base URL already ends in ``/v1``); the SDKs' model listings ``GET /v1/models`` (Anthropic:
``limit``, ``after_id``, ``before_id``; Codex: ``client_version``) and ``GET /models/{id}``.
Gemini CLI (``@google/genai``) ``POST /v1beta/models/{model}:streamGenerateContent?alt=sse``
(the Gemini base URL is the host; ``/v1beta`` or ``/v1`` is the client's API version): the
model is read from its path segment (a plain id, runs/gateway/gemini.py), the ``key`` query
parameter is taken as a credential and never put in the upstream's path.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import runs.gateway.gemini as gemini
import runs.gateway.wire as wire

# The root of the API a base URL may or may not include ("https://api.anthropic.com" + "/v1").
PREFIXES = ("", "/v1")
# Gemini's API versions, as its clients add them to the base URL.
GEMINI_PREFIXES = ("", "/v1", "/v1beta")
# A path segment and a query value: letters, digits and the few marks model ids and versions
# use; never "%" (no encoded dots or slashes), ";", "#", "\\", spaces or quotes.
_SEGMENT = re.compile(r"[A-Za-z0-9_~:@+-][A-Za-z0-9._~:@+-]*")
_VALUE = re.compile(r"[A-Za-z0-9._~:@+-]{0,200}")
MAX_TARGET = 2048


@dataclass(frozen=True)
class Route:
    method: str
    path: str  # relative to the API's root; "{id}" is one segment (a model's id)
    api: str
    query: frozenset[str] = frozenset()  # the parameters the API defines for it
    prefixes: tuple[str, ...] = PREFIXES
    stream: bool = False  # the path itself asks for a stream (Gemini)


ROUTES = (
    Route("POST", "/chat/completions", wire.CHAT),
    Route("POST", "/responses", wire.RESPONSES),
    Route("POST", "/messages", wire.MESSAGES, frozenset({"beta"})),
    Route("POST", "/messages/count_tokens", wire.COUNT_TOKENS, frozenset({"beta"})),
    Route(
        "GET",
        "/models",
        wire.MODELS,
        frozenset({"beta", "limit", "after_id", "before_id", "client_version"}),
    ),
    Route("GET", "/models/{id}", wire.MODELS, frozenset({"beta"})),
    Route(
        "POST",
        f"/models/{{model}}:{gemini.GENERATE}",
        wire.GEMINI,
        frozenset({gemini.KEY_PARAM}),
        GEMINI_PREFIXES,
    ),
    Route(
        "POST",
        f"/models/{{model}}:{gemini.STREAM}",
        wire.GEMINI,
        frozenset({gemini.KEY_PARAM, "alt"}),
        GEMINI_PREFIXES,
        stream=True,
    ),
    Route(
        "POST",
        f"/models/{{model}}:{gemini.COUNT_TOKENS}",
        wire.GEMINI_COUNT_TOKENS,
        frozenset({gemini.KEY_PARAM}),
        GEMINI_PREFIXES,
    ),
)
_BY_PATH = {(r.method, r.path): r for r in ROUTES}
# The methods a Gemini path names after its model (``models/{model}:generateContent``);
# another (``models/ft:gpt-4o:org``, an OpenAI model's id) is a plain ``/models/{id}``.
GEMINI_METHODS = frozenset({gemini.GENERATE, gemini.STREAM, gemini.COUNT_TOKENS})


class BadTarget(ValueError):
    """A request target the gateway will not even look up (400): what is wrong with it."""


@dataclass(frozen=True)
class Match:
    """A request's place in the table: its route (None: a well-formed path the gateway does not
    forward, 404) and the path the upstream gets, relative to the configured base URL."""

    route: Route | None
    upstream_path: str
    model: str = ""  # the model a Gemini path names
    key: str | None = None  # a Gemini ``?key=``: a credential, not forwarded

    @property
    def api(self) -> str | None:
        return self.route.api if self.route is not None else None


def match(method: str, target: str) -> Match:
    """The route of ``method target``; BadTarget when the target is not a plain origin-form
    path with a query the API defines."""
    if len(target) > MAX_TARGET:
        raise BadTarget(f"the request target is over {MAX_TARGET} characters")
    if not target.startswith("/"):
        what = "an absolute URL" if "://" in target else f"{target[:40]!r}"
        raise BadTarget(f"the request target must be a path (origin-form), not {what}")
    path, has_query, query = target.partition("?")
    segments = path[1:].split("/")
    for segment in segments:
        if not _SEGMENT.fullmatch(segment) or ".." in segment:
            raise BadTarget(
                f"the path segment {segment[:40]!r} is not a plain name "
                "(no empty, '.' or '..' segments, no percent-encoding, ';', '#' or '\\\\')"
            )
    prefix, rest = "", path
    for root in ("/v1", "/v1beta"):
        if path.startswith(root + "/"):
            prefix, rest = root, path[len(root) :]
    key, model = rest, ""
    if rest.startswith("/models/") and rest.count("/") == 2:
        key = "/models/{id}"
        name, colon, action = rest[len("/models/") :].rpartition(":")
        if colon and action in GEMINI_METHODS:  # a Gemini method: the model must be plain
            if not gemini.MODEL_ID.fullmatch(name) or ".." in name:
                raise BadTarget(f"the model {name[:40]!r} in the path is not a plain model id")
            key, model = f"/models/{{model}}:{action}", name
    route = _BY_PATH.get((method, key))
    if route is None or prefix not in route.prefixes:
        return Match(None, path)
    params = _query(query, route) if has_query else []
    credential = next((v for n, v in params if n == gemini.KEY_PARAM), None)
    params = [(n, v) for n, v in params if n != gemini.KEY_PARAM]
    if route.stream and any(n == "alt" and v != "sse" for n, v in params):
        raise BadTarget("the query parameter 'alt' may only be 'sse' (or left out)")
    upstream = prefix + rest
    if params:
        upstream += "?" + "&".join(f"{name}={value}" for name, value in params)
    return Match(route, upstream, model, credential)


def _query(query: str, route: Route) -> list[tuple[str, str]]:
    params: list[tuple[str, str]] = []
    for part in query.split("&"):
        name, _, value = part.partition("=")
        if name not in route.query:
            allowed = ", ".join(sorted(route.query)) or "none"
            raise BadTarget(
                f"the query parameter {name[:40]!r} is not one {route.method} {route.path} "
                f"takes (it takes: {allowed})"
            )
        if not _VALUE.fullmatch(value):
            raise BadTarget(f"the query parameter {name!r} has a value that is not a plain word")
        if any(name == seen for seen, _ in params):
            raise BadTarget(f"the query parameter {name!r} is given twice")
        params.append((name, value))
    return params
