"""A SWE-bench dataset whose instances each ship their own Dockerfile and eval script.

The layout read (``ab import-swebench DATASET --dockerfiles DIR``): one folder per instance,
named by its ``instance_id``, holding a ``Dockerfile`` (the folder is its build context) and
``eval.sh`` (the instance's own final-test script, printing its test output between the
harness's ``>>>>> Start Test Output`` / ``>>>>> End Test Output`` markers)::

    DIR/<instance_id>/Dockerfile
    DIR/<instance_id>/eval.sh
    DIR/<instance_id>/...          (anything the Dockerfile COPYs)

This is the shape of SWE-bench Pro's ``dockerfiles/instance_dockerfile/<instance_id>/``
(there an instance's Dockerfile starts ``FROM`` a base image built from
``dockerfiles/base_dockerfile/<instance_id>/``, which must then be on the engine). A row may
instead carry its script in an ``eval_script`` field, as SWE-bench's published rows do; the
folder's ``eval.sh`` wins when both exist.

Each row gets ``DOCKERFILE_FIELD`` (the context folder, absolute, and the hash of its content:
the Dockerfile environment's key, ``sandbox.environments.dockerfile.context_key``) and
``EVAL_SCRIPT_FIELD`` (the script's text, stored so a run uses what was imported). Both are in
the task's hashed spec: a changed Dockerfile, file of the context or script is a new revision.
A dataset row that brings ``DOCKERFILE_FIELD`` itself is refused (it would name a host folder
to build). No Django here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from tasks_app.swebench.dataset import Record
from tasks_app.swebench.errors import Problem

DOCKERFILE_FIELD: Final = "agentbench_dockerfile"
EVAL_SCRIPT_FIELD: Final = "eval_script"
EVAL_SCRIPT_NAME: Final = "eval.sh"
DOCKERFILE_NAME: Final = "Dockerfile"
# An eval script is read whole into the task row: a bound on it.
MAX_EVAL_SCRIPT_BYTES: Final = 1024 * 1024


def dockerfile_of(row: dict[str, Any]) -> dict[str, str] | None:
    """The row's Dockerfile environment ({"context": folder, "key": content hash}), or None."""
    value = row.get(DOCKERFILE_FIELD)
    if isinstance(value, dict) and value.get("context") and value.get("key"):
        return value
    return None


def refuse_reserved(records: list[Record]) -> list[Problem]:
    """Rows imported without ``--dockerfiles`` may not name a build context themselves."""
    return [
        Problem(r.where, "is set by --dockerfiles, not by the dataset", DOCKERFILE_FIELD)
        for r in records
        if DOCKERFILE_FIELD in r.data
    ]


def attach(records: list[Record], folder: Path) -> list[Problem]:
    """Give each record its folder's build context and eval script (in place); every
    instance without a folder, a Dockerfile or an eval script is a problem naming both."""
    from sandbox.environments.dockerfile import DockerfileBuildError, context_key, dockerfile_text

    problems = refuse_reserved(records)
    if problems:
        return problems
    root = Path(folder).resolve()
    if not root.is_dir():
        return [Problem("--dockerfiles", f"{folder}: no such folder")]
    for record in records:
        row = record.data
        instance_id = row.get("instance_id")
        if not isinstance(instance_id, str) or not instance_id or "/" in instance_id:
            continue  # the row's own check names a bad instance_id
        context = root / instance_id
        where = f"{record.where} ({instance_id})"
        if not context.is_dir() or context.is_symlink():
            problems.append(Problem(where, f"no folder {context}", "--dockerfiles"))
            continue
        if context.resolve().parent != root:
            problems.append(Problem(where, f"{context} leads outside {root}", "--dockerfiles"))
            continue
        dockerfile = context / DOCKERFILE_NAME
        if not dockerfile.is_file() or dockerfile.is_symlink():
            problems.append(Problem(where, f"no {DOCKERFILE_NAME} at {dockerfile}", "Dockerfile"))
            continue
        script, problem = _eval_script(context, row)
        if problem:
            problems.append(Problem(where, problem, EVAL_SCRIPT_NAME))
            continue
        try:
            key = context_key(context, dockerfile_text=dockerfile_text(context))
        except DockerfileBuildError as exc:
            problems.append(Problem(where, str(exc), "Dockerfile"))
            continue
        row[DOCKERFILE_FIELD] = {"context": str(context), "key": key}
        row[EVAL_SCRIPT_FIELD] = script
    return problems


def _eval_script(context: Path, row: dict[str, Any]) -> tuple[str, str]:
    """(the script, "") or ("", why there is none)."""
    path = context / EVAL_SCRIPT_NAME
    if path.is_file() and not path.is_symlink():
        if path.stat().st_size > MAX_EVAL_SCRIPT_BYTES:
            return "", f"{path} is over {MAX_EVAL_SCRIPT_BYTES // 1024} KiB"
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            return "", f"{path} is not UTF-8 text"
        if text.strip():
            return text, ""
        return "", f"{path} is empty"
    own = row.get(EVAL_SCRIPT_FIELD)
    if isinstance(own, str) and own.strip():
        return own, ""
    return "", f"no {EVAL_SCRIPT_NAME} at {path} (and no eval_script field in the row)"
