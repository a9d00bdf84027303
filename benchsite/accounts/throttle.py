"""Password guessing is throttled: ``LOGIN_FAILURE_LIMIT`` failed sign-ins for one username from
one address (REMOTE_ADDR, as the audit log reads it) lock that pair out for
``LOGIN_LOCKOUT_SEC``, the right password included, with a message that says so.

Django's own pieces, no extra package: failures are counted from the ``user_login_failed``
signal (every ``authenticate()`` given the request: the site's login page and the admin's),
``LockoutBackend`` (Django's ModelBackend, the one ``AUTHENTICATION_BACKENDS``) refuses a
locked pair before any password is checked, and ``LockoutMessageMixin`` puts the message on
both login forms. The
counts live in the default cache (``CACHE_URL``): point it at Redis when several web processes
serve, or each counts alone. API tokens are not passwords (32 random bytes, checked by hash):
the API has no password door to throttle.
"""

from __future__ import annotations

import hashlib
from typing import Any

from django.conf import settings
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.core.cache import cache
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest

from benchsite.accounts.services import client_ip


def _key(kind: str, username: str, request: HttpRequest) -> str:
    # Hashed: a username is client input of any length and characters, a cache key is not.
    who = f"{username.strip().casefold()}\0{client_ip(request) or ''}"
    return f"login-{kind}:{hashlib.sha256(who.encode()).hexdigest()}"


def lockout_message(request: HttpRequest | None, username: str | None) -> str | None:
    """The message for a locked (username, address) pair, or None when it may try."""
    if request is None or not username:
        return None
    if cache.get(_key("locked", username, request)) is None:
        return None
    minutes = max(1, round(settings.LOGIN_LOCKOUT_SEC / 60))
    return (
        f"Too many failed sign-ins for {username!r} from your address: locked for "
        f"{minutes} minute{'s' if minutes != 1 else ''}. Try again later."
    )


def login_failed(sender: Any, credentials: dict, request: HttpRequest | None = None, **_) -> None:
    """``user_login_failed``: count one failure; the limit-th locks the pair out."""
    username = credentials.get("username")
    if request is None or not username:
        return
    count_key = _key("failures", username, request)
    cache.add(count_key, 0, timeout=settings.LOGIN_LOCKOUT_SEC)
    try:
        failures = cache.incr(count_key)
    except ValueError:  # expired between add and incr
        cache.set(count_key, failures := 1, timeout=settings.LOGIN_LOCKOUT_SEC)
    if failures >= settings.LOGIN_FAILURE_LIMIT:
        cache.set(_key("locked", username, request), 1, timeout=settings.LOGIN_LOCKOUT_SEC)
        cache.delete(count_key)


def logged_in(sender: Any, request: HttpRequest | None, user: Any, **_) -> None:
    """``user_logged_in``: a success forgets the pair's failures."""
    if request is not None:
        cache.delete(_key("failures", user.get_username(), request))


class LockoutBackend(ModelBackend):
    """Django's backend, but a locked pair is refused before its password is checked
    (PermissionDenied stops ``authenticate()``)."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if lockout_message(request, username):
            raise PermissionDenied("locked out")
        return super().authenticate(request, username=username, password=password, **kwargs)


class LockoutMessageMixin:
    """For an AuthenticationForm: a locked pair gets the lockout message, not "wrong password"
    (which would invite more guesses)."""

    request: HttpRequest | None
    data: Any

    def clean(self):
        username = self.data.get("username")
        message = lockout_message(self.request, username)
        if message:
            raise ValidationError(message, code="locked")
        try:
            return super().clean()  # type: ignore[misc]
        except ValidationError:
            # The failure that reached the limit says so at once.
            message = lockout_message(self.request, username)
            if message:
                raise ValidationError(message, code="locked") from None
            raise


class SiteAuthenticationForm(LockoutMessageMixin, AuthenticationForm):
    pass


class AdminLoginForm(LockoutMessageMixin, AdminAuthenticationForm):
    pass


def connect() -> None:
    """Called once by the accounts app (``AccountsConfig.ready``)."""
    from django.contrib import admin

    user_login_failed.connect(login_failed, dispatch_uid="accounts-login-failed")
    user_logged_in.connect(logged_in, dispatch_uid="accounts-logged-in")
    admin.site.login_form = AdminLoginForm
