"""Who may read what. Leaderboards and artifacts (logs, patches, trajectories) are separate."""

from __future__ import annotations

from django.conf import settings


def can_read_leaderboards(user) -> bool:
    return bool(settings.ANONYMOUS_READ_LEADERBOARDS or user.is_authenticated)


def can_read_artifacts(user) -> bool:
    """Logs, patches and downloads can hold secrets from a task's repository or setup."""
    return bool(settings.ANONYMOUS_READ_ARTIFACTS or user.is_authenticated)
