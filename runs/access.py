"""Who may read what. Leaderboards and artifacts (logs, patches, trajectories) are separate.

Artifacts need the ``runs.read_artifacts`` permission, which the "readers" group gives (staff
and superusers read them too); ``ANONYMOUS_READ_ARTIFACTS`` opens them to everyone. Signing in
alone is not enough: an account made for one purpose (an API token to launch runs, say) does
not see a task repository's secrets in its logs.
"""

from __future__ import annotations

from django.conf import settings

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
