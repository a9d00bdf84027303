"""What the pipeline needs to know about one task, as plain data (no Django).

``execute`` builds a ``TaskPlan`` from the Task row; the stage functions only read this.
"""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tasks_app.spec import ValidationSpec
from tasks_app.swebench.own_dockerfile import BUILD_TIMEOUT_SEC

if TYPE_CHECKING:
    from tasks_app.models import Task

SITE_PACKAGES_DIR = "site-packages"
USER_BASE_DIR = ".pyuser"
DEFAULT_WORKSPACE = "/workspace"
# SWE-bench instance images hold the repository at /testbed; the workspace is bound there.
SWEBENCH_TESTBED = "/testbed"


@dataclass(frozen=True)
class TaskPlan:
    task_id: str
    repo_url: str
    commit: str
    image: str
    workdir: str  # inside the sandbox, e.g. /workspace/repo
    workspace_path: str  # where the host workspace is mounted inside the sandbox
    test_command: str
    timeout_sec: int
    setup_commands: tuple[str, ...] = ()
    setup_timeout_sec: int = 300
    setup_network: bool = True
    validation: ValidationSpec = field(default_factory=ValidationSpec)
    is_swebench: bool = False
    test_patch: str = ""
    fail_to_pass: tuple[str, ...] = ()
    pass_to_pass: tuple[str, ...] = ()
    swebench_repo: str = ""
    swebench_version: str = ""
    problem_statement: str = ""
    gold_patch: str = ""
    # A SWE-bench instance built here (``ab swebench build``): its bubblewrap root filesystem.
    rootfs: str = ""
    # A Harbor task folder (runs/pipeline/harbor.py): its spec as imported (tasks_app.harbor).
    harbor: dict = field(default_factory=dict)

    @property
    def is_harbor(self) -> bool:
        return bool(self.harbor)

    # A task's own image on bubblewrap (runs/pipeline/images.py): its exported tree, and the
    # image's ``Env`` ("KEY=value"), which an engine would set.
    image_tree: str = ""
    image_env: tuple[str, ...] = ()
    # A task.yaml's ``environment.dockerfile``: the build context folder (absolute) the
    # pipeline builds into ``image`` first (runs/pipeline/environment_build.py).
    dockerfile_context: str = ""
    build_timeout_sec: int = 600
    # A SWE-bench instance imported with its own Dockerfile (``--dockerfiles``): its own eval
    # script, run as the final tests instead of the one made from the specification.
    eval_script: str = ""
    # ... and the content hash of its folder at import (the attempt refuses a changed folder).
    dockerfile_key: str = ""
    # The sandbox's CPU quota when the task's source names one (None: SANDBOX_CPUS).
    cpus: float | None = None
    # The digest of the image the attempt runs on, when it is a pulled one (else "").
    image_digest: str = ""

    @property
    def repo_rel(self) -> str:
        """The repository's folder relative to the workspace ("" when it is the workspace)."""
        rel = posixpath.relpath(posixpath.normpath(self.workdir), self.workspace_path)
        if rel.startswith(".."):
            raise ValueError(
                f"task {self.task_id}: workdir {self.workdir!r} is not inside the workspace "
                f"{self.workspace_path!r}"
            )
        return "" if rel == "." else rel

    @property
    def site_packages(self) -> str:
        return posixpath.join(self.workspace_path, SITE_PACKAGES_DIR)

    @property
    def user_base(self) -> str:
        return posixpath.join(self.workspace_path, USER_BASE_DIR)

    def sandbox_env(self) -> dict[str, str]:
        """Environment of every command in the sandbox: pip installs made during setup stay
        importable in later stages, and no bytecode lands in the repository. A SWE-bench
        instance built here runs with its venv first on PATH (the official harness activates
        its conda env the same way)."""
        env = {
            "PYTHONPATH": self.site_packages,
            "PYTHONUSERBASE": self.user_base,
            "PYTHONDONTWRITEBYTECODE": "1",
            "PIP_CACHE_DIR": "/tmp/.pip-cache",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        }
        if self.rootfs and not self.image_tree:  # an offline build (an image brings its own)
            from sandbox.environments.envspec import VENV
            from sandbox.environments.trees import PATH_ENV

            env |= {"PATH": f"{VENV}/bin:{PATH_ENV}", "VIRTUAL_ENV": VENV}
        return env


def plan_for_task(task: Task, *, default_image: str) -> TaskPlan:
    """The plan for a Task row (task.yaml or SWE-bench instance)."""
    spec = task.spec if isinstance(task.spec, dict) else {}
    is_swebench = task.source == "swebench"
    validation = ValidationSpec()
    if not is_swebench and isinstance(spec.get("validation"), dict):
        validation = ValidationSpec.model_validate(spec["validation"])
    setup = spec.get("setup")
    if not isinstance(setup, dict):
        setup = {}
    workspace_path = SWEBENCH_TESTBED if is_swebench else DEFAULT_WORKSPACE
    workdir = task.workdir or workspace_path
    if is_swebench and not workdir.startswith(SWEBENCH_TESTBED):
        workdir = SWEBENCH_TESTBED
    return TaskPlan(
        task_id=task.task_id,
        repo_url=task.repo_url,
        commit=task.repo_commit or "HEAD",
        image=task.docker_image or default_image,
        workdir=workdir,
        workspace_path=workspace_path,
        test_command=task.test_command,
        timeout_sec=task.timeout_sec,
        setup_commands=tuple(task.setup_commands or ()),
        setup_timeout_sec=int(setup.get("timeout_sec") or task.timeout_sec),
        setup_network=task.setup_network,
        validation=validation,
        is_swebench=is_swebench,
        test_patch=task.test_patch,
        fail_to_pass=tuple(task.fail_to_pass or ()),
        pass_to_pass=tuple(task.pass_to_pass or ()),
        swebench_repo=str(spec.get("repo") or _repo_slug(task.repo_url)),
        swebench_version=str(spec.get("version") or task.instance_version or ""),
        problem_statement=task.problem_statement,
        gold_patch=task.gold_patch,
        harbor=spec if task.source == "harbor" else {},
        **_dockerfile(task, spec),
        cpus=task_cpus(spec, is_swebench=is_swebench),
    )


# A SWE-bench instance's own image build may install a whole project's dependencies.
SWEBENCH_BUILD_TIMEOUT_SEC = BUILD_TIMEOUT_SEC


def _dockerfile(task: Task, spec: dict) -> dict:
    """A task.yaml's build context, resolved against its file (checked where it may lead at
    import: ``tasks_app.spec``); a SWE-bench instance's own folder and eval script
    (``tasks_app.swebench.task_folders``, absolute and checked at import)."""
    if task.source == "swebench":
        from tasks_app.swebench.task_folders import EVAL_SCRIPT_FIELD, dockerfile_of

        own = dockerfile_of(spec)
        if own is None:
            return {}
        return {
            "dockerfile_context": own["context"],
            "build_timeout_sec": SWEBENCH_BUILD_TIMEOUT_SEC,
            "eval_script": str(spec.get(EVAL_SCRIPT_FIELD) or ""),
            "dockerfile_key": own["key"],
        }
    environment = spec.get("environment") if task.source == "task_yaml" else None
    if not isinstance(environment, dict) or not environment.get("dockerfile"):
        return {}
    context = Path(task.spec_path).parent / str(environment["dockerfile"])
    return {
        "dockerfile_context": str(context.resolve()),
        "build_timeout_sec": int(environment.get("build_timeout_sec") or 600),
    }


def host_cpus() -> int:
    return os.cpu_count() or 1


def task_cpus(spec: dict, *, is_swebench: bool) -> float | None:
    """The CPUs a task's source gives its sandbox, at most the host's: ``environment.cpus``
    of a task.yaml, ``cpus`` of a SWE-bench row; a SWE-bench instance names none and gets
    all the host's, as the official harness's containers (no CPU limit) do. Test suites size
    themselves from the cgroup's quota (pylint's parallel tests skip with "Need 2 or more
    cores" under SANDBOX_CPUS=1.0, where upstream runs them). None: SANDBOX_CPUS."""
    environment = spec.get("environment")
    asked = environment.get("cpus") if isinstance(environment, dict) else None
    if asked is None:
        asked = spec.get("cpus") if is_swebench else None
    if isinstance(asked, bool) or not isinstance(asked, int | float) or asked <= 0:
        return float(host_cpus()) if is_swebench else None
    # Docker refuses a quota past the host's CPUs; a cgroup would just never use it.
    return min(float(asked), float(host_cpus()))


def _repo_slug(url: str) -> str:
    # "https://github.com/astropy/astropy(.git)" -> "astropy/astropy"
    parts = url.rstrip("/").removesuffix(".git").split("/")
    return "/".join(parts[-2:]) if len(parts) >= 2 else url
