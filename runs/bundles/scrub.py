"""Keys and tokens out of everything an export writes, and a last scan that proves it.

An export gathers what the installation stored (model calls recorded by the gateway, logs,
the run's configuration snapshot), and any of it may hold a secret: the key a configuration
names (``api_key_env``: its value in this process's environment), a gateway token
(``abgw-...``, one per attempt), or a header an agent printed. Every file is scrubbed by value
(``runs.gateway.redact.Redactor``) and by shape (the patterns below), then scanned again:
an export that still holds one is refused, naming the file, and an import refuses a bundle
that holds one.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

from django.conf import settings

from runs.gateway.redact import MIN_SECRET_CHARS, REDACTED, Redactor
from runs.gateway.server import TOKEN_PREFIX

_R = re.escape(REDACTED.encode())
# Secrets by shape: a gateway token, an OpenAI/Anthropic style key, a credential header's
# value (JSON, HTTP or YAML spelling).
PATTERNS = (
    re.compile(re.escape(TOKEN_PREFIX.encode()) + rb"[A-Za-z0-9_\-]{16,}"),
    re.compile(rb"\bsk-(?:ant-)?[A-Za-z0-9_\-]{16,}"),
    re.compile(
        rb"(?i)((?:authorization|x-api-key|api-key|x-goog-api-key)[\"']?\s*[:=]\s*[\"']?"
        rb"(?:bearer\s+)?)(?!" + _R + rb")([^\s\"',}]{8,})"
    ),
)
SECRET_NAME = re.compile(r"(?i)(key|token|secret|password)")


class BundleSecretError(ValueError):
    """A file of an export or a bundle that holds a secret after scrubbing."""

    def __init__(self, name: str, what: str):
        super().__init__(f"{name}: holds {what}; nothing written")
        self.name = name


def known_secrets(extra: Iterable[str] = ()) -> list[str]:
    """Secret values this installation knows: each configuration's key (by the variable it
    names), every environment variable named like a secret, the Django secret key."""
    from runs.models import ModelConfig

    names = set(ModelConfig.objects.exclude(api_key_env="").values_list("api_key_env", flat=True))
    names |= {n for n in os.environ if SECRET_NAME.search(n)}
    values = {os.environ.get(n, "") for n in names} | {settings.SECRET_KEY, *extra}
    return sorted(v for v in values if len(v) >= MIN_SECRET_CHARS)


class Scrubber:
    """Replaces the secrets of one export in bytes; ``leak`` says what one still holds."""

    def __init__(self, secrets: Iterable[str]):
        self.redactor = Redactor(secrets)

    def scrub(self, data: bytes) -> bytes:
        data = self.redactor.bytes(data)
        for pattern in PATTERNS:
            if pattern.groups:
                data = pattern.sub(lambda m: m.group(1) + REDACTED.encode(), data)
            else:
                data = pattern.sub(REDACTED.encode(), data)
        return data

    def leak(self, data: bytes) -> str:
        """What secret ``data`` holds ("" for none): a known value or a secret's shape."""
        for secret in self.redactor.raw:
            if secret in data:
                return "a key or token of this installation"
        for pattern in PATTERNS:
            if pattern.search(data):
                return "a value shaped like a key or token"
        return ""

    def check(self, files: Mapping[str, bytes]) -> None:
        """Raise ``BundleSecretError`` for the first file that still holds a secret."""
        for name, data in sorted(files.items()):
            what = self.leak(data)
            if what:
                raise BundleSecretError(name, what)
