"""Writes for access control: issuing and revoking API tokens, recording audit events."""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from collections.abc import Iterable
from typing import Any

from django.db import IntegrityError, transaction
from django.http import HttpRequest
from django.utils import timezone

from benchsite.accounts.models import Action, ApiToken, AuditEvent, Door

TOKEN_MARK = "ab_"
PREFIX_LENGTH = 12  # "ab_" and 9 random characters: enough to find the row, not to guess it
TOKEN_NAME_MAX = 100
# last_used_at is informational: writing it on every request would turn reads into writes.
LAST_USED_RESOLUTION_SEC = 60


class TokenError(ValueError):
    """A token request that cannot be honoured, naming the field at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def token_digest(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def api_token_create(
    *, user, name: str, door: Door = Door.PAGE, request: HttpRequest | None = None
):
    """Issue a token for ``user``. Returns ``(token_row, raw_token)``; the raw value is not kept."""
    name = (name or "").strip()
    if not name:
        raise TokenError("name", "name must not be empty")
    if len(name) > TOKEN_NAME_MAX:
        raise TokenError("name", f"name must be at most {TOKEN_NAME_MAX} characters")
    for _ in range(5):
        raw = TOKEN_MARK + secrets.token_urlsafe(32)
        try:
            with transaction.atomic():
                token = ApiToken.objects.create(
                    user=user, name=name, prefix=raw[:PREFIX_LENGTH], token_hash=token_digest(raw)
                )
                audit_event_record(
                    actor=user,
                    action=Action.TOKEN_CREATE,
                    objects=[token],
                    request=request,
                    door=door,
                    details={"name": name, "prefix": token.prefix},
                )
            return token, raw
        except IntegrityError:
            continue  # a prefix collision: draw again
    raise RuntimeError("could not draw a unique token prefix")


def api_token_revoke(
    *, token: ApiToken, by, door: Door = Door.PAGE, request: HttpRequest | None = None
) -> ApiToken:
    """Revoke ``token`` (idempotent). Requests carrying it get 401 from then on."""
    with transaction.atomic():
        if token.revoked_at is None:
            token.revoked_at = timezone.now()
            token.save(update_fields=["revoked_at"])
            audit_event_record(
                actor=by,
                action=Action.TOKEN_REVOKE,
                objects=[token],
                request=request,
                door=door,
                details={"name": token.name, "prefix": token.prefix},
            )
    return token


def api_token_authenticate(*, raw: str) -> ApiToken | None:
    """The active token matching ``raw``, or None. Compares digests in constant time."""
    if not raw.startswith(TOKEN_MARK) or len(raw) <= PREFIX_LENGTH:
        return None
    token = (
        ApiToken.objects.active().select_related("user").filter(prefix=raw[:PREFIX_LENGTH]).first()
    )
    if token is None or not hmac.compare_digest(token.token_hash, token_digest(raw)):
        return None
    if not token.user.is_active:
        return None
    now = timezone.now()
    if (
        token.last_used_at is None
        or (now - token.last_used_at).total_seconds() > LAST_USED_RESOLUTION_SEC
    ):
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token


def client_ip(request: HttpRequest | None) -> str | None:
    # REMOTE_ADDR only: X-Forwarded-For is client-controlled unless a trusted proxy sets it.
    if request is None:
        return None
    return request.META.get("REMOTE_ADDR") or None


def _object_ref(obj: Any) -> str:
    for attr in ("public_id", "name", "pk"):
        value = getattr(obj, attr, None)
        if value is not None:
            return str(value)
    return str(obj)


def _os_user() -> str:
    import getpass

    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (a container's arbitrary uid)
        return ""


def _scrubbed(details: dict) -> dict:
    # Details quote client input (file names...): JSON-safe, and without the NUL characters
    # PostgreSQL's jsonb refuses.
    text = json.dumps(details, default=str).replace("\\u0000", "")
    return json.loads(text)


def audit_event_record(
    *,
    actor,
    action: Action,
    door: Door,
    objects: Iterable[Any] = (),
    request: HttpRequest | None = None,
    token: ApiToken | None = None,
    details: dict | None = None,
    object_type: str = "",
) -> AuditEvent:
    """Append one audit event. ``objects`` are recorded by public id (or name, or pk).

    The write services call it inside their transaction, whatever the door: an entry point
    never records by hand. The CLI acts without an account: its events name the OS user.
    """
    objects = list(objects)
    details = dict(details or {})
    if door == Door.CLI and actor is None:
        details.setdefault("os_user", _os_user())
    if not object_type and objects:
        object_type = objects[0]._meta.label_lower if hasattr(objects[0], "_meta") else ""
    if token is None and request is not None:
        token = getattr(request, "api_token", None)
    user = actor if actor is not None and getattr(actor, "is_authenticated", False) else None
    return AuditEvent.objects.create(
        actor=user,
        actor_name=user.get_username() if user is not None else "",
        token=token,
        action=str(action),
        via=door,
        object_type=object_type,
        object_ids=[_object_ref(obj) for obj in objects],
        details=_scrubbed(details),
        ip=client_ip(request),
    )
