"""Where a model configuration may send the worker's API key, and which key (no Django at import).

A configuration names an upstream (``base_url``) and the environment variable that holds the
key (``api_key_env``); the LLM agent and the gateway of agent CLIs send that variable's value
to that upstream. Left open, anyone who may write a configuration could name any variable of
the worker (``DJANGO_SECRET_KEY``, ``DATABASE_URL``, a cloud key) and any host (their own) and
receive the secret with the first model call. So both come from the operator's lists:

- ``api_key_env``: one of ``GATEWAY_API_KEY_ENVS`` (the providers' usual key variables by
  default, plus ``LLM_API_KEY_ENV``); the variables the site itself reads for its secrets are
  never allowed, whatever the list says;
- ``base_url``: ``https://``, or ``http://`` to a loopback address (a local server), to a host
  in ``GATEWAY_UPSTREAMS`` (the public providers and loopback by default, plus the host of
  ``LLM_BASE_URL``); no credentials, query or fragment in the URL; link-local, multicast and
  unspecified addresses (cloud metadata, ``0.0.0.0``) never, even when listed.

The same ``UpstreamPolicy`` checks a configuration when it is written (``ModelConfig.clean``
and ``save``: the API, the admin and the CLI alike) and again when an attempt starts
(``runs.pipeline.agent_stage.model_settings_for``, and the gateway when it opens): a row stored
before the lists existed, or written by raw SQL, never gets the key.
"""

from __future__ import annotations

import ipaddress
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass

# The key variables of the providers whose APIs the LLM agent and the agent CLIs speak.
DEFAULT_KEY_ENVS = (
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "OPENROUTER_API_KEY",
    "MISTRAL_API_KEY",
    "DEEPSEEK_API_KEY",
    "GROQ_API_KEY",
    "TOGETHER_API_KEY",
    "XAI_API_KEY",
)
# The providers' API hosts, and loopback (local servers: vLLM, Ollama, the tests' fakes).
DEFAULT_UPSTREAMS = (
    "api.anthropic.com",
    "api.openai.com",
    "generativelanguage.googleapis.com",
    "openrouter.ai",
    "api.mistral.ai",
    "api.deepseek.com",
    "api.groq.com",
    "api.together.xyz",
    "api.x.ai",
    "localhost",
    "127.0.0.1",
    "::1",
)
# Variables the site and its services read for their own secrets: never a model key.
FORBIDDEN_KEY_ENVS = frozenset(
    {
        "DJANGO_SECRET_KEY",
        "SECRET_KEY",
        "DATABASE_URL",
        "CELERY_BROKER_URL",
        "CELERY_RESULT_BACKEND",
        "CACHE_URL",
        "REDIS_URL",
        "AB_TEST_PG_URL",
        "AB_TEST_REDIS_URL",
        "PGPASSWORD",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_ACCESS_KEY_ID",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "AZURE_CLIENT_SECRET",
        "GITHUB_TOKEN",
        "GH_TOKEN",
        "DOCKER_HOST",
        "SSH_AUTH_SOCK",
    }
)
LOOPBACK_NAMES = frozenset({"localhost"})


class UpstreamRefused(ValueError):
    """A configuration's key variable or upstream is not allowed: ``field`` names which."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def _host_port(entry: str) -> tuple[str, int | None]:
    """``host``, ``host:port``, ``[v6]:port`` or a bare v6 address, lower-cased."""
    entry = entry.strip().lower().rstrip(".")
    if entry.startswith("["):
        host, _, rest = entry[1:].partition("]")
        return host, int(rest[1:]) if rest.startswith(":") and rest[1:].isdigit() else None
    if entry.count(":") == 1:
        host, _, port = entry.partition(":")
        if port.isdigit():
            return host, int(port)
    return entry, None


def _ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def is_loopback(host: str) -> bool:
    ip = _ip(host)
    return host in LOOPBACK_NAMES if ip is None else ip.is_loopback


@dataclass(frozen=True)
class UpstreamPolicy:
    """The operator's lists: key variable names, and upstream hosts (``host`` for any port,
    ``host:port`` for one)."""

    key_envs: frozenset[str]
    upstreams: frozenset[tuple[str, int | None]]

    @classmethod
    def of(cls, key_envs: Iterable[str], upstreams: Iterable[str]) -> UpstreamPolicy:
        return cls(
            frozenset(name.strip() for name in key_envs if name.strip()),
            frozenset(_host_port(entry) for entry in upstreams if entry.strip()),
        )

    def key_env_problem(self, name: str) -> str | None:
        """Why the key may not be read from variable ``name`` (empty: no key), or None."""
        if not name:
            return None
        if name in FORBIDDEN_KEY_ENVS:
            return f"{name!r} holds one of the site's own secrets, never a model key"
        if name not in self.key_envs:
            allowed = ", ".join(sorted(self.key_envs)) or "none"
            return f"{name!r} is not in GATEWAY_API_KEY_ENVS (allowed: {allowed})"
        return None

    def base_url_problem(self, url: str) -> str | None:
        """Why the key may not be sent to ``url`` (empty: the default upstream), or None."""
        if not url:
            return None
        try:
            parts = urllib.parse.urlsplit(url)
            port = parts.port
        except ValueError as exc:
            return f"{url!r} is not a URL ({exc})"
        scheme, host = parts.scheme.lower(), (parts.hostname or "").rstrip(".")
        if scheme not in ("http", "https"):
            return f"scheme {scheme or '(none)'!r} refused: https://, or http:// to loopback"
        if not host:
            return f"{url!r} names no host"
        if parts.username is not None or parts.password is not None:
            return "credentials in the URL are refused (the key comes from api_key_env)"
        if parts.query or parts.fragment:
            return "a query or fragment in the base URL is refused"
        ip = _ip(host)
        if (
            ip is not None
            and not ip.is_loopback
            and (ip.is_link_local or ip.is_multicast or ip.is_unspecified or ip.is_reserved)
        ):
            return f"{host} is an internal address (link-local, multicast or unspecified)"
        if scheme == "http" and not is_loopback(host):
            return f"http:// only to loopback; use https:// for {host}"
        effective = port if port is not None else (443 if scheme == "https" else 80)
        if (host, None) not in self.upstreams and (host, effective) not in self.upstreams:
            listed = ", ".join(sorted(h if p is None else f"{h}:{p}" for h, p in self.upstreams))
            return f"{host} is not in GATEWAY_UPSTREAMS (allowed: {listed or 'none'})"
        return None

    def problems(self, *, base_url: str, api_key_env: str) -> dict[str, str]:
        """{field: why} for each of the two that is refused; empty when both are allowed."""
        found = {
            "base_url": self.base_url_problem(base_url),
            "api_key_env": self.key_env_problem(api_key_env),
        }
        return {field: why for field, why in found.items() if why}

    def check(self, *, base_url: str, api_key_env: str) -> None:
        """Raise ``UpstreamRefused`` naming the first refused field."""
        for field, why in self.problems(base_url=base_url, api_key_env=api_key_env).items():
            raise UpstreamRefused(field, why)


def policy_from_settings() -> UpstreamPolicy:
    """The policy of ``GATEWAY_API_KEY_ENVS`` and ``GATEWAY_UPSTREAMS``, with the defaults the
    site falls back on (``LLM_API_KEY_ENV``, ``LLM_BASE_URL``'s host) always in."""
    from django.conf import settings

    hosts = list(settings.GATEWAY_UPSTREAMS)
    default = urllib.parse.urlsplit(settings.LLM_BASE_URL or "")
    if default.hostname:
        hosts.append(default.hostname)
    return UpstreamPolicy.of([*settings.GATEWAY_API_KEY_ENVS, settings.LLM_API_KEY_ENV], hosts)
