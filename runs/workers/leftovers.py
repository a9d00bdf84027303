"""The reaper's clean-up of finished attempts: containers and workspaces still around.

An attempt removes its container and its workspace itself before it reaches a final state, but
not when that failed: the engine was gone when the sandbox closed (its container outlives the
engine's restart), or the worker died between the two. ``leftovers_remove`` (run by the
periodic reaper, ``runs.attempts_reap``) removes both for attempts already final. Running and
queued attempts are never touched, nor a workspace kept on purpose (``--keep-workspace``
leaves ``KEEP_MARKER`` beside it).
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

from runs.models import FINAL_STATES, Attempt
from runs.pipeline.artifacts import WORKSPACE_DIR
from runs.services import attempt_container_label

log = logging.getLogger(__name__)

ATTEMPT_LABEL = "agentbench.attempt"
KEEP_MARKER = "workspace.kept"


@dataclass
class LeftoverReport:
    containers: list[str] = field(default_factory=list)  # attempt public ids
    # Export containers a process killed mid-export left (no attempt names them).
    export_containers: int = 0
    workspaces: list[str] = field(default_factory=list)  # artifacts_dir of each


def leftovers_remove() -> LeftoverReport:
    """Remove containers (on this machine's engine) and workspaces (under ARTIFACTS_ROOT) of
    attempts in a final state."""
    report = LeftoverReport()
    _remove_containers(report)
    _remove_export_containers(report)
    _remove_workspaces(report)
    return report


def _remove_containers(report: LeftoverReport) -> None:
    try:
        from sandbox.docker_backend import managed_label_values, remove_stale_containers
    except ImportError:  # no docker package: no containers either
        return
    try:
        public_ids = managed_label_values(ATTEMPT_LABEL)
    except Exception:  # the engine is down: nothing to do until it is back
        log.warning("reaper: could not list sandbox containers", exc_info=True)
        return
    if not public_ids:
        return
    final = Attempt.objects.filter(public_id__in=_uuids(public_ids), status__in=FINAL_STATES)
    for public_id in final.values_list("public_id", flat=True):
        try:
            if remove_stale_containers(attempt_container_label(public_id)):
                report.containers.append(str(public_id))
        except Exception:
            log.warning("reaper: could not remove the container of %s", public_id, exc_info=True)


def _remove_export_containers(report: LeftoverReport) -> None:
    try:
        from sandbox.docker_images import remove_stale_export_containers
    except ImportError:  # no docker package: no containers either
        return
    try:
        report.export_containers = remove_stale_export_containers()
    except Exception:  # the engine is down: nothing to do until it is back
        log.warning("reaper: could not remove stale export containers", exc_info=True)


def _uuids(values: set[str]) -> list[str]:
    import uuid

    valid = []
    for value in values:
        try:
            valid.append(str(uuid.UUID(value)))
        except ValueError:
            continue
    return valid


def _remove_workspaces(report: LeftoverReport) -> None:
    root = Path(settings.ARTIFACTS_ROOT)
    found = {
        ws.parent.relative_to(root).as_posix(): ws
        for ws in root.glob(f"*/*/{WORKSPACE_DIR}")
        if ws.is_dir() and not (ws.parent / KEEP_MARKER).exists()
    }
    if not found:
        return
    done = Attempt.objects.filter(artifacts_dir__in=list(found), status__in=FINAL_STATES)
    from sandbox.disk import remove_leftover

    for artifacts_dir, public_id in done.values_list("artifacts_dir", "public_id"):
        # A killed try's disk quota may still be bound over it (see sandbox.disk).
        remove_leftover(f"ab-attempt-{public_id}", found[artifacts_dir])
        shutil.rmtree(found[artifacts_dir], ignore_errors=True)
        report.workspaces.append(artifacts_dir)
