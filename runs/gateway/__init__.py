"""The model gateway: the one address a CLI agent's model calls reach while its attempt runs.

    with open_gateway(GatewayConfig(upstream_base_url=..., upstream_api_key=..., ...)) as gw:
        SandboxConfig(..., gateway=gw.sandbox_mount)   # the CLI uses gw.sandbox_base_url
        ...                                            # with gw.token as its key
    gw.summary                                         # calls, tokens, cost, budget, errors

It listens on a Unix socket whose folder is mounted into the sandbox (a forwarder in every exec
serves it on ``127.0.0.1:<port>`` inside: sandbox/gateway_mount.py) and on a loopback TCP port for
agents running on the worker (``gw.host_base_url``). It reads requests with h11 (inbound.py),
forwards only its route table's (routes.py), swaps the attempt's token for the real key, forwards
OpenAI chat completions, OpenAI Responses, Anthropic Messages and Google's Gemini API (gemini.py;
streaming or not, the answer passed on as it arrives), refuses a request naming another model than
the configuration's (or its ``allowed_models``), retries transient upstream failures, keeps the
budgets (reserved by the calls in flight, a stream cut when it passes them: ledger.py, meter.py),
and writes every request to ``model_calls.jsonl``. The key, the token and any configured secret are
taken out of everything it writes or passes on, by value (redact.py).

Record format (``agentbench.model_call.v1``), one JSON object per request, in the order requests
end: ``format``, ``seq`` (order of arrival), ``started_at`` (ISO, UTC), ``duration_ms``, ``via``
(``sandbox`` or ``host``), ``method``, ``path``, ``api`` (``openai-chat``, ``openai-responses``,
``anthropic-messages``, ``anthropic-count-tokens``, ``gemini``, ``gemini-count-tokens``, ``models``,
or null for a path not forwarded; a ``key`` query parameter's value is ``[redacted]`` in ``path``),
``model_call`` (counted against the budgets), ``model`` and ``stream`` (from the request body;
Gemini: from the path), ``outcome`` (``ok``, ``stream_error``, ``permanent_error``,
``transient_exhausted``, ``budget`` (refused, or a stream cut past its budget), ``refused``,
``not_allowed`` (a path not forwarded, or another model), ``bad_request`` (a malformed head, target
or body: no body kept), ``busy`` (over the limit of connections, calls in flight or request bytes
held), ``client_gone``), ``status`` (what the CLI got), ``retries``, ``attempts`` (each failed try
before the answer: ``status``, ``error``, ``retry_after_sec``, ``waited_sec``), ``error`` (null or
``kind``: permanent, transient, budget, refused...; ``message``; ``budget``), ``usage``
(``input_tokens`` (cached included), ``output_tokens``, ``classes``: ``input``, ``cache_write``,
``cache_write_1h``, ``cache_read``, ``output`` as billed, ``reported``: the upstream's own fields
(nested ones dotted), ``estimated_from_bytes`` when a stream's bytes counted for more output than it
reported; null when it reported none), ``cost_usd`` (null when a price is missing), ``cost`` (USD by
class, ``total``, ``reason``), ``price`` (per class), ``upstream_ms`` (until the upstream's
headers), ``body_cap_bytes``, ``request`` and ``response``: ``headers`` (lower-case names;
Authorization, x-api-key, x-goog-api-key and cookies ``[redacted]``, and any secret value in any
header), ``auth`` (request: ``attempt-token``, ``other`` or ``none``), ``rewritten`` (request: what
the gateway changed before forwarding, if anything), ``status`` (response), ``body`` (text exactly
as sent, secrets replaced by ``[redacted]``, or base64 when not UTF-8: ``body_encoding``; a stream's
raw SSE text, with the error event that ended a cut stream), ``body_bytes`` (full size),
``body_kept_bytes``, ``body_truncated``. A request that was not forwarded (refused, not allowed,
over a budget, a bad request) keeps no body: ``body`` null and ``body_omitted`` (its outcome),
``body_bytes`` its size.

The file has a byte budget (``record_max_bytes``): past 7/8 of it a record is summarised
(``summarised``: true; its metadata, no headers, bodies null with ``body_omitted``
``record_budget``), past all of it only counted; then the last line is
``{"format", "record": "record_budget", "model_call": false, "record_max_bytes",
"summarised", "dropped"}``.

Imports: ``runs.agents`` (the error classifier, the price table) and ``sandbox``; no Django,
no models: settings come in through ``GatewayConfig``.
"""

from runs.gateway.config import (
    GatewayBudgets,
    GatewayConfig,
    GatewayConfigError,
    GatewaySummary,
    UpstreamError,
)
from runs.gateway.server import Gateway, open_gateway

__all__ = [
    "Gateway",
    "GatewayBudgets",
    "GatewayConfig",
    "GatewayConfigError",
    "GatewaySummary",
    "UpstreamError",
    "open_gateway",
]
