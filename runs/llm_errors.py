"""LLM API errors: permanent or transient, and retries with exponential backoff and jitter.

Classification follows fail-fast-and-error-classification.md. Permanent errors (bad key, no
permission, bad request, unknown model, unsupported parameter, request too large) fail the
same way every time: they are raised at once as ``LLMPermanentError`` and the run's fail-fast
stops the model configuration. Transient ones (rate limits, 5xx, overload, timeouts, lost
connections) are retried; anything unrecognised counts as transient, so an unexpected message
never aborts a whole run. The ``openai`` client's own retries are switched off
(``max_retries=0``) so that this module is the only place that retries.
"""

from __future__ import annotations

import contextlib
import email.utils
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import openai

T = TypeVar("T")

PERMANENT_STATUS = frozenset({400, 401, 403, 404, 413, 422})
TRANSIENT_STATUS = frozenset({408, 409, 425, 429})
PERMANENT_PATTERNS = (
    "authentication_error",
    "invalid_api_key",
    "incorrect api key",
    "permission_error",
    "invalid_request_error",
    "not_found_error",
    "model_not_found",
    "unknown model",
    "does not exist",
    "request_too_large",
    "unsupported parameter",
    "unsupported_parameter",
    "unrecognized request argument",
    "unknown option",
    "invalid flag",
    "unrecognized argument",
    # Google's canonical codes (Gemini's error "status", in its message as "STATUS: ...").
    "invalid_argument",
    "permission_denied",
    "unauthenticated",
    "failed_precondition",
    "not_found",
)
TRANSIENT_PATTERNS = (
    "overloaded",
    "rate_limit",
    "rate limit",
    "timeout",
    "timed out",
    "connection",
    "econnrefused",
    "enotfound",
    "etimedout",
    "api_error",
    "temporarily",
    "resource_exhausted",
    "unavailable",
    "deadline_exceeded",
)


class LLMError(Exception):
    """A model call failed for good (after retries, or at once when permanent)."""

    kind = "transient"

    def __init__(self, message: str, *, status: int | None = None, attempts: int = 1):
        super().__init__(message)
        self.status = status
        self.attempts = attempts


class LLMTransientError(LLMError):
    kind = "transient"


class LLMPermanentError(LLMError):
    """Retrying cannot help: auth, permission, bad request, unknown model or parameter."""

    kind = "permanent"


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_attempts: int = 5
    base_delay_sec: float = 1.0
    max_delay_sec: float = 30.0
    jitter: float = 0.25  # +/- this fraction of the delay, so parallel workers spread out

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        base = min(self.max_delay_sec, self.base_delay_sec * (2 ** (attempt - 1)))
        if retry_after is not None:
            base = min(self.max_delay_sec, max(base, retry_after))
        spread = base * self.jitter
        return max(0.0, base + random.uniform(-spread, spread))


def status_of(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def is_permanent(exc: BaseException) -> bool:
    """Whether ``exc`` will fail the same way on every retry."""
    if isinstance(exc, openai.APITimeoutError | openai.APIConnectionError):
        return False
    return is_permanent_status(status_of(exc), str(exc))


def is_permanent_status(status: int | None, message: str) -> bool:
    """Whether an API answer with this HTTP status (None: no answer) and error message will
    fail the same way on every retry. The one classifier: the LLM agent applies it to the
    client's exceptions, the model gateway (runs/gateway) to the upstream's answers."""
    if status is not None:
        if status in PERMANENT_STATUS:
            return True
        if status in TRANSIENT_STATUS or status >= 500:
            return False
    message = message.lower()
    if any(p in message for p in TRANSIENT_PATTERNS):
        return False
    return any(p in message for p in PERMANENT_PATTERNS)


def describe(exc: BaseException) -> str:
    status = status_of(exc)
    where = f" (HTTP {status})" if status is not None else ""
    message = " ".join(str(exc).split())[:400]
    return f"{type(exc).__name__}{where}: {message}"


def _retry_after(exc: BaseException) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    return retry_after_sec(headers.get("retry-after-ms"), headers.get("retry-after"))


def retry_after_sec(retry_after_ms: str | None, retry_after: str | None) -> float | None:
    """Seconds the server asked us to wait: ``retry-after-ms`` (OpenAI), else ``Retry-After``
    in seconds or as an HTTP date; None when neither says."""
    with contextlib.suppress(TypeError, ValueError):
        return max(0.0, float(retry_after_ms or "") / 1000)
    if not retry_after:
        return None
    with contextlib.suppress(ValueError):
        return max(0.0, float(retry_after))
    with contextlib.suppress(TypeError, ValueError, IndexError):
        when = email.utils.parsedate_to_datetime(retry_after)
        return max(0.0, when.timestamp() - time.time())
    return None


def call_with_retries(
    call: Callable[[], T],
    *,
    policy: RetryPolicy,
    on_retry: Callable[[int, BaseException, float], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    deadline: float | None = None,
) -> T:
    """Run ``call``; retry transient API errors, raise ``LLMPermanentError`` at once and
    ``LLMTransientError`` when the attempts (or the time until ``deadline``) run out."""
    attempt = 0
    while True:
        attempt += 1
        try:
            return call()
        except LLMError:
            raise
        except openai.OpenAIError as exc:
            status = status_of(exc)
            if is_permanent(exc):
                raise LLMPermanentError(describe(exc), status=status, attempts=attempt) from exc
            wait = policy.delay(attempt, _retry_after(exc))
            out_of_time = deadline is not None and time.monotonic() + wait >= deadline
            if attempt >= policy.max_attempts or out_of_time:
                raise LLMTransientError(
                    f"{describe(exc)} (gave up after {attempt} attempt(s))",
                    status=status,
                    attempts=attempt,
                ) from exc
            if on_retry is not None:
                on_retry(attempt, exc, wait)
            sleep(wait)
