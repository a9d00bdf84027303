"""SWE-bench instance rows: field checks, test-list decoding, image names. No Django here.

Facts from the harness (FORMATS.md): every value of an instance is a string, and
``FAIL_TO_PASS`` / ``PASS_TO_PASS`` are JSON-encoded lists inside that string. We keep the
whole row as it came (``Task.spec``) and decode only what the bench uses.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from tasks_app.swebench.dataset import Record, kind_of
from tasks_app.swebench.errors import Problem
from tasks_app.swebench.test_commands import command_for

REQUIRED_FIELDS = (
    "instance_id",
    "repo",
    "base_commit",
    "patch",
    "test_patch",
    "problem_statement",
    "version",
    "FAIL_TO_PASS",
    "PASS_TO_PASS",
)
# Strings when present; older copies lack some of them (Verified adds difficulty).
OPTIONAL_STRING_FIELDS = ("hints_text", "created_at", "environment_setup_commit", "difficulty")
# A row may name its own image (datasets built on SWE-bench do; tests point at a local image).
IMAGE_FIELDS = ("image_name", "docker_image")

INSTANCE_ID_RE = re.compile(r"^[A-Za-z0-9_.-]+__[A-Za-z0-9_.-]+-\d+$")
REPO_RE = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")

DEFAULT_IMAGE_TEMPLATE = "swebench/sweb.eval.x86_64.{key}:latest"
WORKDIR = "/testbed"
# The harness's per-instance evaluation timeout.
TEST_TIMEOUT_SEC = 1800


def image_key(instance_id: str) -> str:
    """The harness's image key: lower-cased, ``__`` spelled ``_1776_`` (Docker forbids ``__``)."""
    return instance_id.lower().replace("__", "_1776_")


def image_name(instance_id: str, template: str = "", **extra: str) -> str:
    """The instance image. ``template`` may use {key}, {instance_id}, {repo}, {version}."""
    template = template or DEFAULT_IMAGE_TEMPLATE
    values = {"key": image_key(instance_id), "instance_id": instance_id, **extra}
    try:
        return template.format(**values)
    except (KeyError, IndexError, ValueError) as exc:
        raise ValueError(
            f"image template {template!r}: unknown placeholder {exc}; "
            "use {key}, {instance_id}, {repo}, {version}"
        ) from exc


def decode_test_list(value: Any) -> list[str]:
    """Decode FAIL_TO_PASS / PASS_TO_PASS. Raises ValueError saying what is wrong."""
    if not isinstance(value, str):
        raise ValueError(f"must be a string holding a JSON list, got {kind_of(value)}")
    try:
        decoded = json.loads(value)
    except json.JSONDecodeError as exc:
        raise ValueError(f"is not valid JSON ({exc.msg})") from exc
    except RecursionError:
        raise ValueError("is not valid JSON (nested too deep)") from None
    if not isinstance(decoded, list):
        raise ValueError(f"must decode to a list of strings, got {kind_of(decoded)}")
    for index, item in enumerate(decoded):
        if not isinstance(item, str):
            raise ValueError(f"item {index} must be a string, got {kind_of(item)}")
    return decoded


@dataclass(frozen=True, slots=True)
class Instance:
    """A checked instance row and the Task column values derived from it."""

    instance_id: str
    where: str
    row: dict[str, Any]
    fail_to_pass: list[str]
    pass_to_pass: list[str]

    @property
    def repo(self) -> str:
        return self.row["repo"]

    def labels(self) -> list[str]:
        """swebench, the repository's name, and whether its environment builds here with the
        Python its specification asks for (``env-exact``) or a newer one (``env-approximate``)."""
        from sandbox.environments.envspec import environment_label

        env = environment_label(self.row["repo"], str(self.row["version"]))
        return ["swebench", self.row["repo"].split("/", 1)[1], *([env] if env else [])]

    def pythons(self) -> tuple[str, str]:
        """(the Python its specification asks for, the one used here), "" when not buildable:
        stored on the task at import (``Task.python_asked`` / ``python_used``)."""
        from sandbox.environments.envspec import approximate_pythons

        return approximate_pythons(self.row["repo"], str(self.row["version"]))

    def task_fields(self, *, image_template: str = "") -> dict[str, Any]:
        """Task column values (hashed to detect changes, so keep them deterministic)."""
        from tasks_app.swebench.task_folders import dockerfile_of

        row = self.row
        built = dockerfile_of(row)
        own_image = next((row[f] for f in IMAGE_FIELDS if row.get(f)), "")
        if built is not None:  # its own Dockerfile: the tag the engine builds it under
            from sandbox.environments.dockerfile_store import tag_for

            own_image = tag_for(built["key"])
        docker_image = own_image or image_name(
            self.instance_id, image_template, repo=row["repo"], version=row["version"]
        )
        return {
            "source": "swebench",
            "spec": row,
            "repo_url": f"https://github.com/{row['repo']}",
            "repo_commit": row["base_commit"],
            "docker_image": docker_image,
            "workdir": WORKDIR,
            "timeout_sec": TEST_TIMEOUT_SEC,
            # The instance image already holds the repo and its environment.
            "setup_commands": [],
            "setup_network": False,
            "test_command": _test_command(row) if built is None else OWN_EVAL_SCRIPT,
            "labels": self.labels() + (["dockerfile"] if built is not None else []),
            "problem_statement": row["problem_statement"],
            "hints_text": row.get("hints_text") or "",
            "gold_patch": row["patch"],
            "test_patch": row["test_patch"],
            "fail_to_pass": self.fail_to_pass,
            "pass_to_pass": self.pass_to_pass,
            "environment_setup_commit": row.get("environment_setup_commit") or "",
            "instance_version": row["version"],
            "difficulty": row.get("difficulty") or "",
        }


# The test command shown for an instance that brings its own eval script (task_folders).
OWN_EVAL_SCRIPT = "bash eval.sh  # the instance's own eval script"


def _test_command(row: dict[str, Any]) -> str:
    """The official test command(s): a Python repo's on its test files, with the environment
    activated (``test_commands``); another language's as its specification lists them."""
    from tasks_app.swebench.languages import is_python, official_test_commands

    if is_python(row["repo"]):
        return command_for(row["repo"], row["version"], row["test_patch"])
    return "; ".join(official_test_commands(row["repo"], row["version"]))


def check_instance(record: Record) -> tuple[Instance | None, list[Problem]]:
    """Check one row; returns the instance, or None and every problem found in it."""
    row = record.data
    where = record.where
    problems: list[Problem] = []
    for name in REQUIRED_FIELDS:
        if name not in row or row[name] is None:
            problems.append(Problem(where, "missing", name))
        elif not isinstance(row[name], str):
            problems.append(Problem(where, f"must be a string, got {kind_of(row[name])}", name))
    for name in (*OPTIONAL_STRING_FIELDS, *IMAGE_FIELDS):
        # null is how parquet spells an absent optional string.
        if row.get(name) is not None and not isinstance(row[name], str):
            problems.append(Problem(where, f"must be a string, got {kind_of(row[name])}", name))
    if problems:
        return None, problems
    if not INSTANCE_ID_RE.match(row["instance_id"]):
        got = row["instance_id"][:80]
        problems.append(
            Problem(where, f"must look like owner__name-NUMBER, got {got!r}", "instance_id")
        )
    if not REPO_RE.match(row["repo"]):
        got = row["repo"][:80]
        problems.append(Problem(where, f"must look like owner/name, got {got!r}", "repo"))
    if not row["version"].strip():
        problems.append(Problem(where, "must not be empty", "version"))
    lists: dict[str, list[str]] = {}
    for name in ("FAIL_TO_PASS", "PASS_TO_PASS"):
        try:
            lists[name] = decode_test_list(row[name])
        except ValueError as exc:
            problems.append(Problem(where, str(exc), name))
    if problems:
        return None, problems
    from tasks_app.swebench.languages import repo_problems
    from tasks_app.swebench.task_folders import dockerfile_of

    own_image = any(row.get(f) for f in IMAGE_FIELDS) or dockerfile_of(row) is not None
    for name, message in repo_problems(row, own_image=own_image):
        problems.append(Problem(where, message, name))
    if problems:
        return None, problems
    instance = Instance(
        instance_id=row["instance_id"],
        where=where,
        row=row,
        fail_to_pass=lists["FAIL_TO_PASS"],
        pass_to_pass=lists["PASS_TO_PASS"],
    )
    return instance, []


def check_instances(records: list[Record]) -> tuple[list[Instance], list[Problem]]:
    """Check every row and that no instance id repeats."""
    instances: list[Instance] = []
    problems: list[Problem] = []
    first_seen: dict[str, str] = {}
    for record in records:
        instance, found = check_instance(record)
        problems.extend(found)
        if instance is None:
            continue
        if instance.instance_id in first_seen:
            problems.append(
                Problem(
                    record.where,
                    f"duplicate of {first_seen[instance.instance_id]}",
                    "instance_id",
                )
            )
            continue
        first_seen[instance.instance_id] = record.where
        instances.append(instance)
    return instances, problems
