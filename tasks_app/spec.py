"""Loading and validating ``task.yaml`` files: pure, no Django.

Every problem names the file, the field path and (where the YAML has it) the line, and a
directory is checked whole before anything is imported.

The paths a task file names (``repo.url`` as a local path or ``file://`` URL,
``reference_solution``) are host paths read by the harness, as root, and shown to readers or
cloned into a sandbox: they must resolve (links followed) inside the folders ``PathRules``
allows: for an upload its own folder only, and then a local repository must be a git bundle;
for a local import the tasks folder given, the repository's ``tasks/`` and ``examples/``, the
configured tasks folder (``AB_TASKS_DIR``) and any folder the operator adds
(``TASK_PATH_ROOTS``). Anything else is a problem naming the file and field.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import unquote, urlsplit

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
    field_validator,
)
from pydantic_core import ErrorDetails

SUPPORTED_SPEC_VERSIONS = ("1.0",)
TASK_FILE_NAME = "task.yaml"
_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$"
# Suite names appear in URLs (/suites/<slug>/): letters, digits, "_" and "-" only.
_SUITE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_\-]*$"
_URL_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.\-]*)://")
# git's "<transport>::<address>": runs the helper git-remote-<transport> on the host.
_TRANSPORT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9+.\-]*::")
_SCP_LIKE = re.compile(r"^[\w.\-]+@[\w.\-]+:")
# Clone URLs that reach a server, not a host path.
REMOTE_SCHEMES = ("http", "https", "git", "ssh", "git+ssh", "ssh+git")
# The repository's shipped example repositories and tasks (examples/toy_repo.bundle, a task's
# ../toy_fail_pytest/solution.patch): local imports may name them.
EXAMPLES_DIR = Path(__file__).resolve().parent.parent / "examples"
SHIPPED_TASKS_DIR = Path(__file__).resolve().parent.parent / "tasks"
WORKSPACE = "/workspace"
_BUNDLE_HEADERS = (b"# v2 git bundle\n", b"# v3 git bundle\n")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RepoSpec(_Strict):
    url: StrictStr = Field(min_length=1)
    commit: StrictStr = Field(min_length=1)


class EnvironmentSpec(_Strict):
    docker_image: StrictStr = Field(min_length=1)
    workdir: StrictStr = "/workspace/repo"
    timeout_sec: Annotated[StrictInt, Field(gt=0)] = 300
    # The sandbox's CPU quota for this task (the tests see it in the cgroup), at most the
    # host's CPUs; unset: SANDBOX_CPUS.
    cpus: Annotated[StrictFloat, Field(gt=0, le=1024)] | None = None

    @field_validator("workdir")
    @classmethod
    def _inside_the_workspace(cls, value: str) -> str:
        # The host side of the workdir is the workspace folder joined with it.
        clean = posixpath.normpath(value)
        if value.startswith("//") or not (clean == WORKSPACE or clean.startswith(WORKSPACE + "/")):
            raise ValueError(f"must be {WORKSPACE} or a folder inside it")
        return value


class SetupSpec(_Strict):
    commands: list[StrictStr] = []
    # Setup may reach the network (pip install) unless a task says otherwise.
    network: StrictBool = True
    timeout_sec: Annotated[StrictInt, Field(gt=0)] | None = None


class RunSpec(_Strict):
    command: StrictStr = Field(min_length=1)


class ValidationSpec(_Strict):
    expected_exit_codes: list[StrictInt] | None = None
    expected_failing_tests: list[StrictStr] = []
    output_regex: StrictStr | None = None
    enforce_clean_setup: StrictBool = True
    check_flaky: StrictBool = True


class AgentSpec(_Strict):
    entrypoint: StrictStr | None = None
    max_steps: Annotated[StrictInt, Field(gt=0)] | None = None


class TaskSpec(_Strict):
    task_spec_version: Literal["1.0"]
    id: Annotated[StrictStr, Field(pattern=_ID_PATTERN, max_length=200)]
    suite: Annotated[StrictStr, Field(pattern=_SUITE_PATTERN, max_length=100)]
    description: StrictStr = ""
    repo: RepoSpec
    environment: EnvironmentSpec
    setup: SetupSpec = SetupSpec()
    run: RunSpec
    validation: ValidationSpec = ValidationSpec()
    agent: AgentSpec = AgentSpec()
    labels: list[StrictStr] = []
    harness_min_version: StrictStr | None = None
    # A patch file (relative to the task file) that solves the task, for the oracle agent.
    reference_solution: StrictStr | None = None


@dataclass(frozen=True, slots=True)
class SpecProblem:
    file: str
    field: str
    message: str
    line: int | None = None

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.field or '(file)'}: {self.message}"


class TaskSpecError(Exception):
    """One or more task files are invalid; ``problems`` lists each file, field and message."""

    def __init__(self, problems: list[SpecProblem]):
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


@dataclass(frozen=True)
class PathRules:
    """Where the paths a task file names may lead (see the module docstring)."""

    roots: tuple[Path, ...]
    uploaded: bool = False  # then a local repository must be a git bundle file

    @classmethod
    def upload(cls, folder: Path) -> PathRules:
        """An uploaded archive: nothing outside its own unpacked folder."""
        return cls((Path(folder).resolve(),), uploaded=True)

    @classmethod
    def local(cls, target: Path | str, extra: Iterable[Path | str] = ()) -> PathRules:
        """A local import of ``target`` (a folder, or one task file): that folder, the
        repository's tasks/ and examples/, and the ``extra`` folders (the configured tasks
        folder, TASK_PATH_ROOTS)."""
        target = Path(target)
        folder = target if target.is_dir() else target.parent
        roots = (folder, SHIPPED_TASKS_DIR, EXAMPLES_DIR, *extra)
        return cls(tuple(dict.fromkeys(Path(p).resolve() for p in roots)))

    def allows(self, path: Path) -> bool:
        try:
            real = path.resolve()
        except (OSError, RuntimeError):  # a loop of links leads nowhere allowed
            return False
        return any(real.is_relative_to(root) for root in self.roots)

    def where(self) -> str:
        if self.uploaded:
            return "the upload (an uploaded task may only name files inside its archive)"
        return (
            "the tasks folder, the repository's tasks/ and examples/, AB_TASKS_DIR or "
            "TASK_PATH_ROOTS (" + ", ".join(str(r) for r in self.roots) + ")"
        )


class _PathOutside(ValueError):
    """A path of the task file that the rules do not allow; the message says why."""


@dataclass(frozen=True)
class LoadedTask:
    spec: TaskSpec
    path: Path
    raw: dict[str, Any]
    repo_url: str  # resolved: a relative path becomes absolute against the task file
    reference_patch: str = ""
    spec_hash: str = field(default="")


def load_task_file(path: Path | str, *, rules: PathRules | None = None) -> LoadedTask:
    """Load and validate one task file; raise TaskSpecError naming file, field and line.

    ``rules`` say where its paths may lead; by default, a local import of its own folder."""
    path = Path(path)
    rules = rules or PathRules.local(path)
    name = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TaskSpecError([SpecProblem(name, "", f"cannot read file: {exc.strerror}")]) from exc
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        line = getattr(getattr(exc, "problem_mark", None), "line", None)
        raise TaskSpecError(
            [SpecProblem(name, "", f"invalid YAML: {exc}", None if line is None else line + 1)]
        ) from exc
    if not isinstance(raw, dict):
        raise TaskSpecError([SpecProblem(name, "", "expected a mapping at the top level")])
    version = raw.get("task_spec_version")
    if isinstance(version, float | int) and not isinstance(version, bool):
        raw["task_spec_version"] = str(float(version))  # unquoted 1.0 in YAML reads as a float
    if "task_spec_version" in raw and raw["task_spec_version"] not in SUPPORTED_SPEC_VERSIONS:
        raise TaskSpecError(
            [
                SpecProblem(
                    name,
                    "task_spec_version",
                    f"unsupported version {raw['task_spec_version']!r}; "
                    f"supported: {', '.join(SUPPORTED_SPEC_VERSIONS)}",
                    _line_of(node, ("task_spec_version",)),
                )
            ]
        )
    try:
        spec = TaskSpec.model_validate(raw)
    except ValidationError as exc:
        raise TaskSpecError(
            [
                SpecProblem(name, _dotted(err["loc"]), _message(err), _line_of(node, err["loc"]))
                for err in exc.errors()
            ]
        ) from exc
    # A path is read only once the rules allow it; both problems are named together.
    problems = []
    reference_patch = ""
    if spec.reference_solution:
        patch_path = path.parent / spec.reference_solution
        problem = ""
        if not rules.allows(patch_path):
            problem = f"{spec.reference_solution!r} is outside {rules.where()}"
        elif not patch_path.resolve().is_file():
            problem = f"file not found: {spec.reference_solution}"
        else:
            reference_patch = patch_path.resolve().read_text(encoding="utf-8", errors="replace")
        if problem:
            line = _line_of(node, ("reference_solution",))
            problems.append(SpecProblem(name, "reference_solution", problem, line))
    repo_url = ""
    try:
        repo_url = resolve_repo_url(spec.repo.url, path.parent, rules)
    except _PathOutside as exc:
        problems.append(SpecProblem(name, "repo.url", str(exc), _line_of(node, ("repo", "url"))))
    if problems:
        raise TaskSpecError(problems)
    digest = hashlib.sha256(
        json.dumps([raw, repo_url, reference_patch], sort_keys=True, default=str).encode()
    ).hexdigest()
    return LoadedTask(
        spec=spec,
        path=path,
        raw=raw,
        repo_url=repo_url,
        reference_patch=reference_patch,
        spec_hash=digest,
    )


def resolve_repo_url(url: str, base_dir: Path, rules: PathRules | None = None) -> str:
    """Remote URLs stay as they are; a path (relative ones against ``base_dir``) becomes the
    real path it names, and a ``file://`` URL stays as it is: both must lead where ``rules``
    allow. Raises ``_PathOutside`` saying why not."""
    rules = rules or PathRules.local(base_dir)
    scheme = _URL_SCHEME.match(url)
    if scheme is not None:
        name = scheme.group(1).lower()
        if name in REMOTE_SCHEMES:
            return url
        if name != "file":
            raise _PathOutside(
                f"unsupported URL scheme {name}:// (use {', '.join(REMOTE_SCHEMES)} or a path)"
            )
        parts = urlsplit(url)
        if parts.netloc not in ("", "localhost"):
            raise _PathOutside(f"{url!r}: a file:// URL names this machine only")
        _check_local_repo(url, Path(unquote(parts.path)), rules)
        return url
    if _TRANSPORT.match(url):
        raise _PathOutside(f"{url!r}: git remote helpers (<transport>::<address>) are refused")
    if _SCP_LIKE.match(url):
        return url
    candidate = Path(url)
    if not candidate.is_absolute():
        candidate = base_dir / candidate
    _check_local_repo(url, candidate, rules)
    return str(candidate.resolve())


def _check_local_repo(url: str, path: Path, rules: PathRules) -> None:
    if not rules.allows(path):
        raise _PathOutside(f"{url!r} is outside {rules.where()}")
    if rules.uploaded and not _is_bundle(path.resolve()):
        raise _PathOutside(
            f"{url!r}: an uploaded task's local repository must be a git bundle file in the "
            "upload (git bundle create repo.bundle --all)"
        )


def _is_bundle(path: Path) -> bool:
    # A repository folder can point git elsewhere on the host (a .git file, alternates); a
    # bundle is one self-contained file.
    try:
        with open(path, "rb") as handle:
            return handle.read(len(_BUNDLE_HEADERS[0])) in _BUNDLE_HEADERS
    except OSError:
        return False


def find_task_files(directory: Path | str) -> list[Path]:
    """Every task.yaml under a directory (or the file itself), in a stable order."""
    directory = Path(directory)
    if directory.is_file():
        return [directory]
    return sorted(directory.rglob(TASK_FILE_NAME))


def load_task_dir(directory: Path | str, *, rules: PathRules | None = None) -> list[LoadedTask]:
    """Load every task under a directory; collect all problems and raise them together.

    ``rules`` say where their paths may lead; by default, a local import of ``directory``."""
    directory = Path(directory)
    if not directory.exists():
        raise TaskSpecError([SpecProblem(str(directory), "", "no such file or directory")])
    rules = rules or PathRules.local(directory)
    loaded: list[LoadedTask] = []
    problems: list[SpecProblem] = []
    seen: dict[tuple[str, str], Path] = {}
    for path in find_task_files(directory):
        try:
            task = load_task_file(path, rules=rules)
        except TaskSpecError as exc:
            problems.extend(exc.problems)
            continue
        key = (task.spec.suite, task.spec.id)
        if key in seen:
            problems.append(
                SpecProblem(str(path), "id", f"duplicate task id {key[1]!r}, also in {seen[key]}")
            )
            continue
        seen[key] = path
        loaded.append(task)
    if problems:
        raise TaskSpecError(problems)
    return loaded


def _dotted(loc: tuple[Any, ...]) -> str:
    return ".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in loc).replace(".[", "[")


def _message(err: ErrorDetails) -> str:
    if err["type"] == "extra_forbidden":
        return "unknown key"
    if err["type"] == "missing":
        return "required field is missing"
    return str(err["msg"])


def _line_of(node: yaml.Node | None, loc: tuple[Any, ...]) -> int | None:
    """The 1-based line of the deepest YAML node along ``loc`` that exists."""
    line = None if node is None else node.start_mark.line + 1
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                if key_node.value == part:
                    line = key_node.start_mark.line + 1
                    node = value_node
                    break
            else:
                return line
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
            if part >= len(node.value):
                return line
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            return line
    return line
