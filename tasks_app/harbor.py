"""Harbor / Terminal-Bench task folders read as tasks: pure, no Django.

A Harbor task is a folder: ``instruction.md`` (the problem), ``task.toml`` (timeouts,
resources, network, metadata), ``environment/`` (a Dockerfile and its build context, or
``[environment] docker_image`` naming an image), ``tests/test.sh`` (the verifier, copied to
``/tests`` after the agent; it writes ``/logs/verifier/reward.txt`` or ``reward.json``) and,
optionally, ``solution/solve.sh`` (what the oracle runs).

Every field Harbor documents is either honoured or refused here, by name, with the reason
(``REFUSED``): a task that needs what this harness cannot give (GPUs, MCP servers, a
docker-compose environment, several steps, another user) is never imported to fail later.
Keys Harbor does not document are refused as unknown, like ``task.yaml``'s.
"""

from __future__ import annotations

import hashlib
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings

from tasks_app.spec import PathRules, SpecProblem, TaskSpecError

CONFIG_NAME = "task.toml"
INSTRUCTION_NAME = "instruction.md"
VERIFIER_SCRIPT = "tests/test.sh"
ORACLE_SCRIPT = "solution/solve.sh"
SUPPORTED_VERSIONS = ("1.0", "1.1")
# Harbor's defaults (its task-format reference).
DEFAULT_TIMEOUT_SEC = 600.0
DEFAULT_CPUS = 1
DEFAULT_MEMORY_MB = 2048
DEFAULT_STORAGE_MB = 10240
# The folders Harbor's harness gives a task inside its environment.
TESTS_DIR = "/tests"
SOLUTION_DIR = "/solution"
LOGS_DIR = "/logs"
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,199}$")
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?\s*$", re.IGNORECASE)

# field -> why it is refused (when set to anything but its "off" value).
REFUSED = {
    "environment.gpus": "GPUs: no sandbox backend here gives a GPU",
    "environment.gpu_types": "GPUs: no sandbox backend here gives a GPU",
    "environment.mcp_servers": (
        "MCP servers: the agents here get no MCP server (a sidecar service would need a "
        "compose environment on both backends)"
    ),
    "environment.skills_dir": "agent skills: no agent here reads a skills folder",
    "environment.os": "only Linux environments run here",
    "environment/docker-compose.yaml": (
        "a docker-compose environment (several services) cannot run on the bubblewrap backend "
        "and is not supported on Docker either; give one Dockerfile"
    ),
    "verifier.user": (
        "every command runs as the sandbox's unprivileged user (no root), whatever the task asks"
    ),
    "agent.user": (
        "every command runs as the sandbox's unprivileged user (no root), whatever the task asks"
    ),
    "solution.user": (
        "every command runs as the sandbox's unprivileged user (no root), whatever the task asks"
    ),
    "steps": "multi-step tasks ([[steps]]) are not supported: one instruction, one verifier",
    "artifacts": "extra artifact paths: only /logs/agent and /logs/verifier are collected",
    "environment.healthcheck": "environment health checks are not supported",
    "verifier.environment": "a separate verifier environment is not supported",
}
# What each table may hold: honoured keys (anything in REFUSED is checked first).
_KNOWN = {
    "": {
        "version",
        "schema_version",
        "source",
        "metadata",
        "task",
        "verifier",
        "agent",
        "solution",
        "environment",
    },
    "task": {"name", "description", "authors", "keywords"},
    "verifier": {"timeout_sec", "env"},
    "agent": {"timeout_sec", "setup_timeout_sec"},
    "solution": {"env"},
    "environment": {
        "build_timeout_sec",
        "docker_image",
        "cpus",
        "memory_mb",
        "storage_mb",
        "memory",
        "storage",
        "allow_internet",
    },
}


@dataclass(frozen=True)
class HarborTask:
    """One Harbor task folder, validated."""

    folder: Path
    task_id: str
    instruction: str
    agent_timeout_sec: float
    verifier_timeout_sec: float
    build_timeout_sec: float
    cpus: float
    memory_mb: int
    storage_mb: int
    allow_internet: bool
    docker_image: str  # "" when environment/ is built
    verifier_env: dict[str, str]
    solution_env: dict[str, str]
    has_solution: bool
    metadata: dict[str, Any]
    labels: list[str]
    config: dict[str, Any]  # task.toml as read
    content_hash: str = field(default="")

    @property
    def environment_dir(self) -> Path:
        return self.folder / "environment"

    def spec(self) -> dict[str, Any]:
        """What the Task row keeps: enough to run it without reading task.toml again."""
        return {
            "format": "harbor",
            "folder": str(self.folder),
            "content_hash": self.content_hash,
            "config": self.config,
            "agent_timeout_sec": self.agent_timeout_sec,
            "verifier_timeout_sec": self.verifier_timeout_sec,
            "build_timeout_sec": self.build_timeout_sec,
            "cpus": self.cpus,
            "memory_mb": self.memory_mb,
            "storage_mb": self.storage_mb,
            "allow_internet": self.allow_internet,
            "docker_image": self.docker_image,
            "verifier_env": self.verifier_env,
            "solution_env": self.solution_env,
            "has_solution": self.has_solution,
            "metadata": self.metadata,
        }


def is_harbor_folder(folder: Path) -> bool:
    return (Path(folder) / CONFIG_NAME).is_file()


def find_harbor_folders(directory: Path | str) -> list[Path]:
    """``directory`` itself when it is a Harbor task, else every Harbor task folder under it
    (a task's own folders are not searched: its tests may hold anything)."""
    directory = Path(directory)
    if directory.is_file():
        return [directory.parent] if directory.name == CONFIG_NAME else []
    if is_harbor_folder(directory):
        return [directory]
    found: list[Path] = []
    for root, dirs, files in os.walk(directory):
        if CONFIG_NAME in files:
            found.append(Path(root))
            dirs.clear()
        else:
            dirs.sort()
    return sorted(found)


def content_hash(folder: Path) -> str:
    """A hash of every file the task runs with (instruction, config, environment, tests,
    solution): a run refuses a folder changed since its import."""
    digest = hashlib.sha256()
    folder = Path(folder)
    for path in sorted(p for p in folder.rglob("*") if p.is_file() or p.is_symlink()):
        rel = path.relative_to(folder).as_posix()
        digest.update(rel.encode() + b"\0")
        if path.is_symlink():
            digest.update(b"L" + os.readlink(path).encode())
        else:
            digest.update(b"x" if os.access(path, os.X_OK) else b"-")
            digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


def load_harbor_task(folder: Path | str) -> HarborTask:
    """Read and validate one Harbor task folder; raise TaskSpecError naming each file and
    field that is wrong or refused (all of them at once)."""
    folder = Path(folder).resolve()
    problems: list[SpecProblem] = []
    config_path = folder / CONFIG_NAME

    def problem(file: str, name: str, message: str) -> None:
        problems.append(SpecProblem(str(folder / file), name, message))

    # Every file is read as the harness (instruction, config) or sent to the engine and the
    # sandbox (environment, tests, solution): none may lead out of the task.
    for path in sorted(folder.rglob("*")):
        if path.is_symlink() and not _inside(path, folder):
            problem(str(path.relative_to(folder)), "", "a link leading outside the task")
    if problems:  # checked before any of its files is read
        raise TaskSpecError(problems)
    try:
        config = tomllib.loads(config_path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise TaskSpecError([SpecProblem(str(config_path), "", f"cannot read: {exc}")]) from exc
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise TaskSpecError([SpecProblem(str(config_path), "", f"invalid TOML: {exc}")]) from exc

    reader = _Reader(config, lambda name, message: problem(CONFIG_NAME, name, message))
    reader.check_keys()
    version = config.get("schema_version", config.get("version", "1.0"))
    if str(version) not in SUPPORTED_VERSIONS:
        name = "schema_version" if "schema_version" in config else "version"
        problem(
            CONFIG_NAME,
            name,
            f"unsupported version {version!r}; supported: " + ", ".join(SUPPORTED_VERSIONS),
        )
    if (folder / "environment" / "docker-compose.yaml").exists() or (
        folder / "environment" / "docker-compose.yml"
    ).exists():
        problem("environment", "docker-compose.yaml", REFUSED["environment/docker-compose.yaml"])

    instruction = ""
    try:
        instruction = (folder / INSTRUCTION_NAME).read_text(encoding="utf-8")
    except OSError:
        problem(INSTRUCTION_NAME, "", "missing: the instruction the agent is given")
    except UnicodeDecodeError:
        problem(INSTRUCTION_NAME, "", "not UTF-8 text")
    else:
        if not instruction.strip():
            problem(INSTRUCTION_NAME, "", "empty: the instruction the agent is given")
    if not (folder / VERIFIER_SCRIPT).is_file():
        problem(VERIFIER_SCRIPT, "", "missing: the verifier that writes the reward")

    docker_image = reader.string("environment.docker_image")
    if not docker_image and not (folder / "environment" / "Dockerfile").is_file():
        problem(
            "environment/Dockerfile",
            "",
            "missing: give environment/Dockerfile or [environment] docker_image",
        )

    memory = reader.size_mb("environment.memory_mb", "environment.memory", DEFAULT_MEMORY_MB)
    storage = reader.size_mb("environment.storage_mb", "environment.storage", DEFAULT_STORAGE_MB)
    for dotted, over in over_caps({"memory_mb": memory, "storage_mb": storage}):
        reader.report(f"environment.{dotted}", over)
    metadata: dict[str, Any] = _table(config, "metadata")
    task_table: dict[str, Any] = _table(config, "task")
    task = HarborTask(
        folder=folder,
        task_id=folder.name,
        instruction=instruction,
        agent_timeout_sec=reader.seconds("agent.timeout_sec"),
        verifier_timeout_sec=reader.seconds("verifier.timeout_sec"),
        build_timeout_sec=reader.seconds("environment.build_timeout_sec"),
        cpus=reader.number("environment.cpus", DEFAULT_CPUS),
        memory_mb=memory,
        storage_mb=storage,
        allow_internet=reader.boolean("environment.allow_internet", True),
        docker_image=docker_image,
        verifier_env=reader.env("verifier.env"),
        solution_env=reader.env("solution.env"),
        has_solution=(folder / ORACLE_SCRIPT).is_file(),
        metadata={"task": task_table, **metadata},
        labels=_labels(metadata, task_table),
        config=config,
    )
    reader.seconds("agent.setup_timeout_sec")  # checked; no agent setup runs in the sandbox
    if not _ID.match(task.task_id):
        problem("", "(folder name)", f"{task.task_id!r}: a task id takes letters, digits, . _ -")
    if problems:
        raise TaskSpecError(problems)
    return _with_hash(task)


def suite_name(folder: Path, *, upload_root: Path | None = None) -> str:
    """A Harbor task's suite: the name of the dataset folder holding it, as a slug ("harbor"
    for a task at the top of an upload, whose folder is named by a random id)."""
    if upload_root is not None and folder.parent.resolve() == Path(upload_root).resolve():
        return "harbor"
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", folder.parent.name).strip("-_")
    return slug[:100] or "harbor"


def load_harbor_dir(directory: Path | str, *, rules: PathRules) -> list[HarborTask]:
    """Every Harbor task folder under ``directory``, validated (all problems at once); each
    must lie where ``rules`` allow (an upload's own folder, say)."""
    loaded: list[HarborTask] = []
    problems: list[SpecProblem] = []
    for folder in find_harbor_folders(directory):
        if not rules.allows(folder):
            problems.append(SpecProblem(str(folder), "", f"outside {rules.where()}"))
            continue
        try:
            loaded.append(load_harbor_task(folder))
        except TaskSpecError as exc:
            problems.extend(exc.problems)
    if problems:
        raise TaskSpecError(problems)
    return loaded


def _with_hash(task: HarborTask) -> HarborTask:
    from dataclasses import replace

    return replace(task, content_hash=content_hash(task.folder))


def _table(config: dict[str, Any], name: str) -> dict[str, Any]:
    value = config.get(name)
    return value if isinstance(value, dict) else {}


def _inside(path: Path, folder: Path) -> bool:
    try:
        return path.resolve().is_relative_to(folder)
    except (OSError, RuntimeError):
        return False


def _labels(metadata: dict[str, Any], task_table: dict[str, Any]) -> list[str]:
    labels = ["harbor"]
    for key in ("tags", "keywords"):
        for value in metadata.get(key) or task_table.get(key) or []:
            if isinstance(value, str) and value not in labels:
                labels.append(value)
    for key in ("category", "difficulty"):
        value = metadata.get(key)
        if isinstance(value, str) and value and value not in labels:
            labels.append(value)
    return labels


def over_caps(spec: dict[str, Any]) -> list[tuple[str, str]]:
    """(field, why) for each resource ``spec`` asks for beyond this installation's limits
    (``SANDBOX_MAX_MEMORY_MB``, ``SANDBOX_MAX_DISK_MB``): a task may not take a host's
    whole memory or disk by asking for it."""
    caps = {
        "memory_mb": ("SANDBOX_MAX_MEMORY_MB", settings.SANDBOX_MAX_MEMORY_MB),
        "storage_mb": ("SANDBOX_MAX_DISK_MB", settings.SANDBOX_MAX_DISK_MB),
    }
    found = []
    for name, (setting, cap) in caps.items():
        asked = int(spec.get(name) or 0)
        if cap and asked > cap:
            found.append((name, f"{asked} MB is over this installation's {setting} ({cap} MB)"))
    return found


class _Reader:
    """Typed reads of task.toml's fields, each problem reported by its dotted name."""

    def __init__(self, config: dict[str, Any], report):
        self.config = config
        self.report = report

    def get(self, dotted: str) -> Any:
        table, _, name = dotted.rpartition(".")
        section = self.config.get(table, {}) if table else self.config
        return section.get(name) if isinstance(section, dict) else None

    def check_keys(self) -> None:
        for name, value in self.config.items():
            if name in REFUSED:
                self.report(name, f"refused: {REFUSED[name]}")
            elif name not in _KNOWN[""]:
                self.report(name, "unknown key")
            elif name in _KNOWN and not isinstance(value, dict):
                self.report(name, "must be a table")
            elif name in _KNOWN:
                for key, inner in value.items():
                    dotted = f"{name}.{key}"
                    if dotted in REFUSED:
                        if _is_set(dotted, inner):
                            self.report(dotted, f"refused: {REFUSED[dotted]}")
                    elif key not in _KNOWN[name]:
                        self.report(dotted, "unknown key")

    def seconds(self, dotted: str) -> float:
        value = self.get(dotted)
        if value is None:
            return DEFAULT_TIMEOUT_SEC
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            self.report(dotted, f"must be a positive number of seconds, got {value!r}")
            return DEFAULT_TIMEOUT_SEC
        return float(value)

    def number(self, dotted: str, default: float) -> float:
        value = self.get(dotted)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            self.report(dotted, f"must be a positive number, got {value!r}")
            return default
        return float(value)

    def boolean(self, dotted: str, default: bool) -> bool:
        value = self.get(dotted)
        if value is None:
            return default
        if not isinstance(value, bool):
            self.report(dotted, f"must be true or false, got {value!r}")
            return default
        return value

    def string(self, dotted: str) -> str:
        value = self.get(dotted)
        if value is None:
            return ""
        if not isinstance(value, str) or not value.strip():
            self.report(dotted, f"must be a non-empty string, got {value!r}")
            return ""
        return value.strip()

    def env(self, dotted: str) -> dict[str, str]:
        value = self.get(dotted)
        if value is None:
            return {}
        ok = isinstance(value, dict) and all(
            isinstance(k, str)
            and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k)
            and isinstance(v, str | int | float)
            and not isinstance(v, bool)
            for k, v in value.items()
        )
        if not ok:
            self.report(dotted, 'must be a table of NAME = "value"')
            return {}
        return {k: str(v) for k, v in value.items()}

    def size_mb(self, dotted: str, deprecated: str, default: int) -> int:
        value, old = self.get(dotted), self.get(deprecated)
        if value is not None and old is not None:
            self.report(deprecated, f"give {dotted} or {deprecated}, not both")
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                self.report(dotted, f"must be a positive whole number of MB, got {value!r}")
                return default
            return value
        if old is not None:
            match = _SIZE.match(str(old))
            if not isinstance(old, str) or match is None:
                self.report(deprecated, f'must be a size like "2G" or "512M", got {old!r}')
                return default
            number, unit = float(match.group(1)), match.group(2).upper()
            factor = {"": 1 / 2**20, "K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}[unit]
            return max(int(number * factor), 1)
        return default


def _is_set(dotted: str, value: Any) -> bool:
    """Whether a refused field asks for something (``gpus = 0``, ``mcp_servers = []`` and
    ``os = "linux"`` ask for nothing)."""
    if dotted == "environment.gpus":
        return not (isinstance(value, int) and not isinstance(value, bool) and value == 0)
    if dotted == "environment.os":
        return str(value).lower() != "linux"
    return value not in (None, [], {}, "")
