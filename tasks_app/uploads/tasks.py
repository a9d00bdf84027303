"""An uploaded archive of tasks (task.yaml files, Harbor task folders) imported: the one
service the API endpoint and the admin page call.

The archive is kept unpacked under ``API_UPLOADS_ROOT`` (relative repository URLs, reference
solutions and Harbor folders point into it) when it imported anything; its files may name
nothing outside it (``PathRules.upload``). Problems name the files as they are in the archive.
"""

from __future__ import annotations

import re
import shutil
import uuid
from pathlib import Path
from typing import Any

from django.conf import settings

from benchsite.accounts.models import Door
from tasks_app.actions import tasks_import
from tasks_app.services import ImportReport
from tasks_app.spec import PathRules, SpecProblem, TaskSpecError, load_task_dir
from tasks_app.uploads.files import unpack_upload


def task_archive_import(
    *, upload: Any, actor: Any, door: Door, request: Any = None
) -> ImportReport:
    """Unpack ``upload`` (a .zip, .tar, .tar.gz or .tgz), import every task in it (all or
    nothing; ``TaskSpecError`` naming each file and field); the import service audits who did,
    through which door."""
    target = Path(settings.API_UPLOADS_ROOT) / "tasks" / uuid.uuid4().hex
    unpack_upload(upload, target)
    # Its task files may name files inside the upload only (never a host path, nor another
    # upload's), and a local repository only as a git bundle.
    rules = PathRules.upload(target)
    try:
        _check_suite_names(target, rules)
        report = tasks_import(
            directory=target,
            rules=rules,
            actor=actor,
            door=door,
            request=request,
            file=getattr(upload, "name", "") or "",
        )
    except TaskSpecError as exc:
        shutil.rmtree(target, ignore_errors=True)
        raise TaskSpecError([_relative(problem, target) for problem in exc.problems]) from None
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        raise
    if not (report.created or report.updated):
        # Nothing points into the unpacked files: keep none of them.
        shutil.rmtree(target, ignore_errors=True)
    return report


def _check_suite_names(directory: Path, rules: PathRules) -> None:
    # The spec allows dots in a suite name, but suite URLs take slugs only: a dotted suite
    # would import fine and then break every page and API answer that links to it.
    bad = [
        SpecProblem(str(t.path), "suite", f"{t.spec.suite!r}: use letters, digits, - and _")
        for t in load_task_dir(directory, rules=rules)
        if not re.fullmatch(r"[-a-zA-Z0-9_]+", t.spec.suite)
    ]
    if bad:
        raise TaskSpecError(bad)


def _relative(problem: SpecProblem, root: Path) -> SpecProblem:
    # Name files as they are inside the archive: the unpack directory means nothing to a client.
    name = problem.file
    prefix = str(root) + "/"
    if name.startswith(prefix):
        name = name[len(prefix) :]
    return SpecProblem(name, problem.field, problem.message.replace(prefix, ""), problem.line)
