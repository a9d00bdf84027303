"""The condition's files written into the workspace before the agent starts (a stage of its
own, ``condition_files``; see ``runs/conditions.py``).

Written through the sandbox's file methods, which open every folder of the path without
following links (a link the repository or the setup planted in its place is refused, a link
at the file itself replaced, never written through). A file that cannot be written ends the
attempt before the agent: ``SETUP_FAILED`` ``[condition-files]``, infrastructure, as every
failure before the agent is.
"""

from __future__ import annotations

import posixpath
import time

from django.conf import settings

from runs.conditions import ConditionError, clean_files
from runs.pipeline.plan import TaskPlan
from runs.pipeline.stages import StageResult
from runs.taxonomy import Reason, Stage
from sandbox.base import Sandbox
from sandbox.errors import SandboxPathError

STAGE_NAME = "condition_files"


def write_condition_files(sandbox: Sandbox, plan: TaskPlan, value: object) -> StageResult:
    """Write the files ``value`` holds ({path relative to the repository: text}) into the
    sandbox, checked again first (a configuration saved around its form is not trusted)."""
    result = StageResult(STAGE_NAME, Stage.SETUP)
    started = time.monotonic()
    lines = []
    try:
        files = clean_files(
            value,
            max_files=settings.CONDITION_FILES_MAX,
            max_file_bytes=settings.CONDITION_FILE_MAX_BYTES,
            max_total_bytes=settings.CONDITION_FILES_MAX_BYTES,
        )
    except ConditionError as exc:
        result.reason = Reason.SETUP_FAILED
        result.note = f"[condition-files] {exc}"
        files = {}
    for path, text in sorted(files.items()):
        target = posixpath.join(plan.workdir, path)
        try:
            sandbox.write_file(target, text)
        except (SandboxPathError, OSError) as exc:
            result.reason = Reason.SETUP_FAILED
            result.note = f"[condition-files] {path}: not written ({exc})"
            lines.append(f"{path}: refused: {exc}")
            break
        lines.append(f"{path}: {len(text.encode())} bytes")
    result.extra_duration_sec = time.monotonic() - started
    result.detail = "The condition's files (kept out of the final patch):\n" + "\n".join(
        lines or [result.note]
    )
    return result
