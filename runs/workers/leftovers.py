"""The reaper's clean-up of finished attempts and dead workers: what is still on this machine.

An attempt removes its container, its sandbox's host files, its model gateway's socket folder
and its workspace itself before it reaches a final state, but not when that failed: the engine
was gone when the sandbox closed (its container outlives the engine's restart), or the worker
died between the two. ``leftovers_remove`` (each pass of the reaper, ``runs.workers.reaper``)
removes them for attempts already final: containers, the sandbox's files under /run/agentbench
and its quota mounts (``sandbox.leftovers``), gateway socket folders, workspaces. Running and
queued attempts are never touched, nor a workspace kept on purpose (``--keep-workspace`` leaves
``KEEP_MARKER`` beside it), nor a socket a gateway still answers on, nor anything of an attempt
this database does not know (another deployment on the same machine; an unowned gateway socket
folder only once it is old and silent).

It also removes the folders of ``ab worker`` processes that died without cleaning up (killed):
each worker keeps its ready file and its Celery processes' temporary files (multiprocessing's
``pymp-*`` folders) in one folder, which is dead once no process of that worker holds its lock
(``runs.workers.worker_dir``), not merely once the ``ab worker`` process is gone.
"""

from __future__ import annotations

import logging
import shutil
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

from runs.models import FINAL_STATES, Attempt
from runs.pipeline.artifacts import WORKSPACE_DIR
from runs.services import attempt_container_label
from runs.workers import worker_dir

log = logging.getLogger(__name__)

ATTEMPT_LABEL = "agentbench.attempt"
KEEP_MARKER = "workspace.kept"
# A gateway socket folder no attempt of this database owns (a gateway opened by hand, by a
# test, by another deployment's worker on this machine) is removed only once this old and dead.
UNOWNED_SOCKET_MIN_AGE_SEC = 600


@dataclass
class LeftoverReport:
    containers: list[str] = field(default_factory=list)  # attempt public ids
    # Export containers a process killed mid-export left (no attempt names them).
    export_containers: int = 0
    workspaces: list[str] = field(default_factory=list)  # artifacts_dir of each
    sandbox_files: list[str] = field(default_factory=list)  # sandbox names
    # Model gateway socket folders (their names, under sandbox.gateway_mount.socket_root()).
    gateway_sockets: list[str] = field(default_factory=list)
    worker_dirs: list[str] = field(default_factory=list)  # folders of dead ab workers

    @property
    def found_any(self) -> bool:
        return bool(
            self.containers
            or self.export_containers
            or self.workspaces
            or self.sandbox_files
            or self.gateway_sockets
            or self.worker_dirs
        )


def leftovers_remove() -> LeftoverReport:
    """Remove containers (on this machine's engine), sandbox host files and workspaces (under
    ARTIFACTS_ROOT) of attempts in a final state, and the folders of dead ``ab worker``s."""
    report = LeftoverReport()
    _remove_containers(report)
    _remove_export_containers(report)
    _remove_workspaces(report)
    _remove_sandbox_files(report)
    _remove_gateway_sockets(report)
    _remove_worker_dirs(report)
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
    from sandbox.leftovers import remove_host_leftovers

    for artifacts_dir, public_id in done.values_list("artifacts_dir", "public_id"):
        # A killed try's disk quota may still be bound over it (see sandbox.disk).
        remove_host_leftovers(attempt_sandbox_name(public_id), found[artifacts_dir])
        shutil.rmtree(found[artifacts_dir], ignore_errors=True)
        report.workspaces.append(artifacts_dir)


def attempt_sandbox_name(public_id) -> str:
    """The sandbox an attempt runs in (runs.pipeline.execute: "attempt-<id>", which every
    backend prefixes with "ab-")."""
    return f"ab-attempt-{public_id}"


def _remove_sandbox_files(report: LeftoverReport) -> None:
    """Host files of the sandboxes of final attempts: /run/agentbench/accounts/<name> and the
    like, and quota mounts, which a worker killed mid-attempt leaves."""
    from sandbox.leftovers import host_leftover_names, remove_host_leftovers

    names = {
        name.removeprefix("ab-attempt-"): name
        for name in host_leftover_names()
        if name.startswith("ab-attempt-")
    }
    if not names:
        return
    final = Attempt.objects.filter(public_id__in=_uuids(set(names)), status__in=FINAL_STATES)
    for public_id in final.values_list("public_id", flat=True):
        name = names[str(public_id)]
        try:
            remove_host_leftovers(name)
        except Exception:
            log.warning("reaper: could not remove the files of sandbox %s", name, exc_info=True)
            continue
        report.sandbox_files.append(name)


# --- The folders of ab worker processes ---------------------------------------------------

# Names older callers and tests import from here.
OWNER_FILE = worker_dir.OWNER_FILE
worker_dir_create = worker_dir.worker_dir_create


def _remove_worker_dirs(report: LeftoverReport) -> None:
    """Folders no process of their worker holds the lock of (``runs.workers.worker_dir``)."""
    for folder in worker_dir.worker_dirs():
        if worker_dir.worker_dir_remove_dead(folder):
            report.worker_dirs.append(folder.name)


def _remove_gateway_sockets(report: LeftoverReport) -> None:
    """Socket folders of gateways whose worker died (``<attempt public id>.<random>``, made by
    ``sandbox.gateway_mount.make_socket_dir``). One is removed when its attempt is final and the
    folder older than the attempt's end (a later try's folder is newer), or when no attempt
    here owns it and it is ``UNOWNED_SOCKET_MIN_AGE_SEC`` old; and in both cases only when no
    gateway answers on its socket. A queued or running attempt's folder is never touched."""
    from sandbox.gateway_mount import SOCKET_NAME, owner_of, socket_root

    try:
        folders = [p for p in socket_root().iterdir() if p.is_dir() and not p.is_symlink()]
    except OSError:  # no gateway ever ran here
        return
    owners = {folder: owner_of(folder.name) for folder in folders}
    attempts = {
        str(public_id): (status, finished_at)
        for public_id, status, finished_at in Attempt.objects.filter(
            public_id__in=_uuids({o for o in owners.values() if o})
        ).values_list("public_id", "status", "finished_at")
    }
    now = time.time()
    for folder in folders:
        try:
            made = folder.lstat().st_mtime
        except OSError:
            continue
        known = attempts.get(_uuid_or_empty(owners[folder]))
        if known is not None and known[0] not in FINAL_STATES:
            continue  # a live attempt's (this try's or a killed try's, until it is final)
        if known is not None and known[1] is not None:
            if made >= known[1].timestamp():
                continue  # made after the attempt ended: a retry's try
        elif now - made < UNOWNED_SOCKET_MIN_AGE_SEC:
            continue
        if _answers(folder / SOCKET_NAME):
            continue  # a gateway still serves there
        shutil.rmtree(folder, ignore_errors=True)
        report.gateway_sockets.append(folder.name)


def _uuid_or_empty(value: str) -> str:
    found = _uuids({value}) if value else []
    return found[0] if found else ""


def _answers(path) -> bool:
    """Whether something accepts connections on the Unix socket at ``path``."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(2)
        try:
            probe.connect(str(path))
        except OSError:  # refused (its listener died), missing, not a socket
            return False
    return True
