"""Who is calling the API: bearer tokens, the session (with CSRF), or an allowed anonymous read.

An operation lists the doors it accepts, in order. A request that carries an Authorization
header must carry a valid token: a revoked or unknown one is 401 even where anonymous
reading is allowed, so a client never mistakes a dead token for a working one.

A write's doors (``write_auth``) also check, once the caller is known and before its request
body is read, that the account has the right ``benchsite.accounts.access`` gives that write:
the same rule as the page that does it, 403 with the reason otherwise.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.core.cache import cache
from django.http import HttpRequest
from ninja.errors import AuthenticationError, HttpError
from ninja.security import HttpBearer
from ninja.security.apikey import APIKeyCookie
from ninja.throttling import BaseThrottle
from ninja.utils import check_csrf

from benchsite.accounts.access import require_write
from benchsite.accounts.models import Action, ApiToken, Door
from benchsite.accounts.services import api_token_authenticate


class TokenAuth(HttpBearer):
    """``Authorization: Bearer ab_...``: a token from /account/tokens/ or POST /api/tokens.
    With ``action``, the token's account must also have the right to that write."""

    def __init__(self, action: Action | None = None) -> None:
        super().__init__()
        self.action = action

    def __call__(self, request: HttpRequest) -> Any:
        header = request.headers.get(self.header)
        if header is None:
            return None
        parts = header.split(" ", 1)
        if len(parts) != 2 or parts[0].lower() != self.openapi_scheme.lower():
            raise AuthenticationError(message="Authorization header must be 'Bearer <token>'")
        return self.authenticate(request, parts[1].strip())

    def authenticate(self, request: HttpRequest, token: str) -> ApiToken:
        api_token = api_token_authenticate(raw=token)
        if api_token is None:
            raise AuthenticationError(message="invalid or revoked API token")
        request.user = api_token.user
        request.api_token = api_token  # type: ignore[attr-defined]
        if self.action is not None:
            require_write(api_token.user, self.action, request=request, door=Door.API)
        return api_token


class SessionAuth(APIKeyCookie):
    """The Django session of a signed-in user; unsafe methods also need the CSRF token.

    Unlike ninja's own, it checks CSRF only for a signed-in session, so a request with
    neither a session nor a token gets 401 (not 403) and knows it must authenticate.
    """

    param_name: str = settings.SESSION_COOKIE_NAME

    def __init__(self, action: Action | None = None) -> None:
        super().__init__()
        self.action = action

    def _get_key(self, request: HttpRequest) -> str | None:
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated:
            return None
        if check_csrf(request):
            raise HttpError(403, "CSRF check failed: send the csrftoken cookie as X-CSRFToken")
        return request.COOKIES.get(self.param_name)

    def authenticate(self, request: HttpRequest, key: str | None) -> Any:
        if key is not None and request.user.is_authenticated:
            if self.action is not None:
                require_write(request.user, self.action, request=request, door=Door.API)
            return request.user
        return None


@dataclass(frozen=True)
class AnonymousReader:
    """Stands in for request.auth when the settings let anonymous visitors read."""

    scope: str

    def __str__(self) -> str:
        return f"anonymous:{self.scope}"


class AnonymousRead:
    """Accepts anonymous requests while ``allowed(AnonymousUser())`` says so."""

    def __init__(self, scope: str, allowed: Callable[[Any], bool]) -> None:
        self.scope = scope
        self.allowed = allowed

    def __call__(self, request: HttpRequest) -> AnonymousReader | None:
        return AnonymousReader(self.scope) if self.allowed(AnonymousUser()) else None


token_auth = TokenAuth()
session_auth = SessionAuth()
AUTHENTICATED = [token_auth, session_auth]


def write_auth(action: Action) -> list:
    """The doors of a write: a token or a session whose account may do ``action``."""
    return [TokenAuth(action), SessionAuth(action)]


def _leaderboards_allowed(user: Any) -> bool:
    from benchsite.accounts.access import can_read_leaderboards

    return can_read_leaderboards(user)


def _artifacts_allowed(user: Any) -> bool:
    from benchsite.accounts.access import can_read_artifacts

    return can_read_artifacts(user)


# Suites, tasks, runs, leaderboards, comparisons, taxonomy: ANONYMOUS_READ_LEADERBOARDS.
PUBLIC_READ = [token_auth, session_auth, AnonymousRead("leaderboards", _leaderboards_allowed)]
# Attempt logs, patches and artifact files: ANONYMOUS_READ_ARTIFACTS.
ARTIFACT_READ = [token_auth, session_auth, AnonymousRead("artifacts", _artifacts_allowed)]


_PERIODS = {
    "s": 1,
    "sec": 1,
    "second": 1,
    "m": 60,
    "min": 60,
    "minute": 60,
    "h": 3600,
    "hour": 3600,
    "d": 86400,
    "day": 86400,
}


def parse_rate(rate: str) -> tuple[int, int]:
    """``"30/min"`` -> (30, 60). Raises ValueError naming the setting on anything else."""
    try:
        count, period = rate.strip().split("/", 1)
        return int(count), _PERIODS[period.strip().lower()]
    except (ValueError, KeyError) as exc:
        raise ValueError(f"API_WRITE_RATE must look like '30/min', got {rate!r}") from exc


class WriteRateThrottle(BaseThrottle):
    """At most API_WRITE_RATE writes per token (or session user) per fixed window.

    Counts with cache.add + cache.incr, which are atomic in Redis and in LocMem, so several
    web processes sharing CACHE_URL=redis://... share one budget. No state on the instance:
    one throttle object serves every thread.
    """

    def _ident(self, request: HttpRequest) -> str:
        api_token = getattr(request, "api_token", None)
        if api_token is not None:
            return f"token:{api_token.prefix}"
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated:
            return f"user:{user.pk}"
        return f"ip:{self.get_ident(request)}"

    def allow_request(self, request: HttpRequest) -> bool:
        limit, period = parse_rate(settings.API_WRITE_RATE)
        window = int(time.time()) // period
        key = f"api-write:{self._ident(request)}:{period}:{window}"
        # The key outlives its window by one period so a slow clock edge cannot reset it.
        if cache.add(key, 1, timeout=period * 2):
            return limit >= 1
        try:
            count = cache.incr(key)
        except ValueError:  # evicted between add and incr
            cache.add(key, 1, timeout=period * 2)
            count = 1
        return count <= limit

    def wait(self) -> float:
        _, period = parse_rate(settings.API_WRITE_RATE)
        return period - (time.time() % period)


write_throttle = WriteRateThrottle()
