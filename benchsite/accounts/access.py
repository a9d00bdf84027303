"""Who may read and who may write what: the one permission model of the pages, the admin and
the API.

Reads. Leaderboards and artifacts (logs, patches, trajectories) are separate. Artifacts need the
``runs.read_artifacts`` permission, which the "readers" group gives (staff and superusers read
them too); ``ANONYMOUS_READ_ARTIFACTS`` opens them to everyone. Signing in alone is not enough:
an account made for one purpose (an API token to launch runs, say) does not see a task
repository's secrets in its logs.

Writes. Every write a page, the admin, the API or the CLI offers is an ``Action`` (the same
names the audit log stores), and ``RIGHTS`` says what each needs: the same rule wherever it is
done, since the page views (``write_view``) and the API's doors
(``benchsite.accounts.auth.write_auth``) both ask ``require_write``. The write services record
the audit event of a write themselves (``runs.actions``, ``runs.imports.actions``...). A token
acts with exactly its account's rights; an inactive account has none. A refusal is a
``PermissionDenied`` naming the action and the right it needs (403), and is kept in the audit
log (at most once a minute per account and action, so refused requests cannot flood it).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from functools import wraps
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import transaction

from benchsite.accounts.models import Action, Door
from benchsite.accounts.services import audit_event_record

READERS_GROUP = "readers"
READ_ARTIFACTS = "runs.read_artifacts"


def can_read_leaderboards(user) -> bool:
    return bool(settings.ANONYMOUS_READ_LEADERBOARDS or user.is_authenticated)


def can_read_artifacts(user) -> bool:
    """Logs, patches and downloads can hold secrets from a task's repository or setup."""
    if settings.ANONYMOUS_READ_ARTIFACTS:
        return True
    if not user.is_authenticated or not user.is_active:
        return False
    return bool(user.is_staff or user.has_perm(READ_ARTIFACTS))


def readers_group():
    """The "readers" group with its permission, made when missing (a flushed test database
    keeps the permission rows, which post_migrate recreates, but not the group)."""
    from django.contrib.auth.models import Group, Permission

    group, _ = Group.objects.get_or_create(name=READERS_GROUP)
    app_label, codename = READ_ARTIFACTS.split(".")
    permission = Permission.objects.get(content_type__app_label=app_label, codename=codename)
    group.permissions.add(permission)
    return group


def reader_add(*, username: str, create: bool = False) -> tuple[Any, str]:
    """Put an account in the "readers" group (patches, logs, transcripts).

    With ``create``, a missing account is made with a generated password, returned once
    (``""`` otherwise). Raises ``LookupError`` naming the account when it does not exist.
    """
    from django.contrib.auth import get_user_model

    user_model = get_user_model()
    password = ""
    with transaction.atomic():
        user = user_model.objects.filter(username=username).first()
        if user is None:
            if not create:
                raise LookupError(f"no account named {username!r} (add --create to make one)")
            password = secrets.token_urlsafe(12)
            user = user_model.objects.create_user(username, password=password)
        user.groups.add(readers_group())
    return user, password


# --- Writes ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Right:
    """What an account needs for one write, and the page that sets the rule."""

    staff: bool
    page: str
    # A Django permission needed on top (the admin's own rule for that page).
    permission: str = ""
    superuser: bool = False

    def describe(self) -> str:
        if not self.staff:
            return "a signed-in account"
        if self.superuser:
            return "a superuser"
        return "a staff account" + (f" with {self.permission}" if self.permission else "")


_STAFF_PAGE = "the run page's staff buttons"
_OWN_TOKENS = Right(staff=False, page="/account/tokens/ (your own tokens only)")
RIGHTS: dict[Action, Right] = {
    Action.RUN_LAUNCH: Right(staff=True, page="the suite page's Launch form (staff)"),
    Action.RUN_CANCEL: Right(staff=True, page=_STAFF_PAGE),
    Action.RUN_RETRY: Right(staff=True, page=_STAFF_PAGE),
    Action.RUN_RESUME: Right(staff=True, page=_STAFF_PAGE),
    Action.RUN_EVALUATE: Right(staff=True, page=_STAFF_PAGE),
    Action.MODEL_CONFIG_CREATE: Right(
        staff=True,
        page="the admin's Add model configuration page",
        permission="runs.add_modelconfig",
    ),
    Action.MODEL_CONFIG_UPSTREAM: Right(
        staff=True,
        superuser=True,
        page="the admin's model configuration page (base URL, key variable and agent import "
        "path: superusers)",
    ),
    Action.TASKS_IMPORT: Right(staff=True, page="the admin's import pages (ab import-tasks)"),
    Action.SWEBENCH_IMPORT: Right(staff=True, page="the admin's SWE-bench dataset page"),
    Action.PREDICTIONS_IMPORT: Right(staff=True, page="the admin's predictions page"),
    Action.RESULTS_IMPORT: Right(staff=True, page="the admin's published results page"),
    Action.RUN_IMPORT: Right(staff=True, page="the admin's run folder page"),
    Action.AGENT_CLI_ADD: Right(
        staff=True,
        page="the admin's Add agent CLI definition page",
        permission="runs.add_agentclidefinition",
    ),
    Action.TOKEN_CREATE: _OWN_TOKENS,
    Action.TOKEN_REVOKE: _OWN_TOKENS,
}
ACCESS_DENIED = Action.ACCESS_DENIED
DENIAL_RECORD_EVERY_SEC = 60


def write_refusal(user, action: Action) -> str | None:
    """Why ``user`` may not do ``action``, or None when it may."""
    right = RIGHTS[action]
    if user is None or not user.is_authenticated:
        return f"{action} needs {right.describe()}: sign in or send a token"
    if not user.is_active:
        return f"{action}: the account {user.get_username()!r} is inactive"
    if right.staff and not user.is_staff:
        return (
            f"{action} needs {right.describe()}, as on {right.page}; "
            f"{user.get_username()!r} is not staff"
        )
    if right.superuser and not user.is_superuser:
        return (
            f"{action} needs {right.describe()}, as on {right.page}; "
            f"{user.get_username()!r} is not a superuser"
        )
    if right.permission and not user.has_perm(right.permission):
        return (
            f"{action} needs {right.describe()}, as on {right.page}; "
            f"{user.get_username()!r} lacks {right.permission}"
        )
    return None


def can_write(user, action: Action) -> bool:
    return write_refusal(user, action) is None


def require_write(user, action: Action, *, request=None, door: Door = Door.API) -> None:
    """Raise ``PermissionDenied`` (403, with the reason) unless ``user`` may do ``action``."""
    reason = write_refusal(user, action)
    if reason is None:
        return
    if user is not None and user.is_authenticated:
        _record_denial(user, action, reason, request=request, door=door)
    raise PermissionDenied(reason)


def _record_denial(user, action: Action, reason: str, *, request, door: Door) -> None:
    from django.core.cache import cache

    # cache.add is atomic: one record per account and action per window, whatever the rate.
    if not cache.add(f"write-denied:{user.pk}:{action}", 1, timeout=DENIAL_RECORD_EVERY_SEC):
        return
    path = request.path if request is not None else ""
    audit_event_record(
        actor=user,
        action=ACCESS_DENIED,
        request=request,
        door=door,
        details={"action": str(action), "path": path, "reason": reason},
    )


def write_view(action: Action, *, door: Door = Door.PAGE) -> Callable:
    """A page view that writes: anonymous visitors go to the login page, signed-in accounts
    without the right get 403 (and an audit record naming ``door``), as the API answers them."""

    def decorator(view: Callable) -> Callable:
        @wraps(view)
        def wrapped(request, *args: Any, **kwargs: Any):
            if not request.user.is_authenticated:
                from django.contrib.auth.views import redirect_to_login

                return redirect_to_login(request.get_full_path())
            require_write(request.user, action, request=request, door=door)
            return view(request, *args, **kwargs)

        wrapped.write_action = action  # type: ignore[attr-defined]
        return wrapped

    return decorator
