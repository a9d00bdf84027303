"""Reading an attempt's artifact files (stage logs, diffs, events.jsonl) for the pages.

Everything goes through ``storages["artifacts"]`` so a remote storage works the same. Large
files are never read whole: pages show a tail and offer the download.

An attempt's folder holds what its sandbox wrote (the workspace, while it runs or when kept),
so every reader (API, pages, downloads, log tails, transcript, events) opens a file with
``open_artifact`` and nothing else: the name must stay inside the attempt's folder, and on a
local folder (``storage()`` always reads one through ``ArtifactStorage``) no link is followed,
so ``workspace/repo/leak -> /etc/shadow`` is "no such artifact". Listings show links as links.
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from django.conf import settings
from django.core.exceptions import SuspiciousFileOperation
from django.core.files import File
from django.core.files.storage import FileSystemStorage, Storage, storages

from runs import step_times, transcript
from runs.artifact_storage import ArtifactStorage, Entry
from runs.models import Attempt

LOG_TAIL_BYTES = 64 * 1024
EVENTS_MAX_BYTES = 8 * 1024 * 1024
EVENTS_MAX = 2000
EVENT_FIELD_MAX_CHARS = 20_000
MAX_LISTED_FILES = 500


class ArtifactPathError(ValueError):
    """A requested artifact name that would leave the attempt's folder."""


@dataclass(frozen=True)
class ArtifactFile:
    name: str  # relative to the attempt's folder, "/"-separated
    size: int
    kind: str = "file"  # or "link": shown with its target's text, never opened
    target: str = ""  # a link's target as written (untrusted text)

    @property
    def is_link(self) -> bool:
        return self.kind == "link"


@dataclass(frozen=True)
class LogTail:
    name: str
    size: int
    text: str
    truncated: bool  # True when only the tail is shown


@dataclass
class Event:
    index: int
    kind: str
    tool: str = ""
    at: str = ""
    summary: str = ""
    input: str = ""
    output: str = ""
    is_error: bool = False
    artifact: str = ""  # a file of the attempt's folder the event points at (full output)
    raw: dict = field(default_factory=dict, repr=False)


@dataclass
class Trajectory:
    events: list[Event]
    truncated: bool
    bad_lines: int


def storage() -> Storage:
    """The artifacts storage; a plain ``FileSystemStorage`` (configured by its Django name) is
    read through ``ArtifactStorage``, which follows no link."""
    store = storages["artifacts"]
    if isinstance(store, FileSystemStorage) and not isinstance(store, ArtifactStorage):
        return _no_follow(str(store.location))
    return store


def _no_follow(location: str) -> ArtifactStorage:
    cached = _NO_FOLLOW.get(location)
    if cached is None:
        cached = _NO_FOLLOW[location] = ArtifactStorage(location=location)
    return cached


_NO_FOLLOW: dict[str, ArtifactStorage] = {}


def attempt_root(attempt: Attempt) -> str:
    """The attempt's folder as a storage name (relative, "/"-separated)."""
    root = (attempt.artifacts_dir or "").replace("\\", "/")
    base = str(settings.ARTIFACTS_ROOT).replace("\\", "/").rstrip("/") + "/"
    if root.startswith(base):
        root = root[len(base) :]
    return root.strip("/")


def artifact_name(attempt: Attempt, relative: str) -> str:
    """The storage name of ``relative`` inside the attempt's folder, refusing escapes."""
    root = attempt_root(attempt)
    if not root:
        raise ArtifactPathError("this attempt has no artifacts folder")
    cleaned = posixpath.normpath(relative.replace("\\", "/"))
    parts = PurePosixPath(cleaned).parts
    if not relative or cleaned.startswith("/") or ".." in parts or cleaned in (".", ""):
        raise ArtifactPathError(f"invalid artifact path: {relative!r}")
    return f"{root}/{cleaned}"


def list_artifacts(attempt: Attempt) -> list[ArtifactFile]:
    """Every file under the attempt's folder (breadth-first, capped), sorted by name. A link is
    listed as a link with its target's text; no folder is entered through one."""
    root = attempt_root(attempt)
    if not root:
        return []
    store = storage()
    found: list[ArtifactFile] = []
    pending = [""]
    while pending and len(found) < MAX_LISTED_FILES:
        prefix = pending.pop(0)
        folder = f"{root}/{prefix}".rstrip("/")
        try:
            if isinstance(store, ArtifactStorage):
                entries = store.entries(folder)
            else:  # remote: what the worker uploaded, regular files only
                dirs, files = store.listdir(folder)
                entries = [_remote_entry(store, folder, n) for n in sorted(files)]
                pending.extend(f"{prefix}{d}/" for d in sorted(dirs))
        except (FileNotFoundError, NotADirectoryError, SuspiciousFileOperation):
            continue
        for entry in entries:
            relative = f"{prefix}{entry.name}"
            if entry.kind == "dir":
                pending.append(f"{relative}/")
            elif entry.kind in ("file", "link"):
                found.append(ArtifactFile(relative, entry.size, entry.kind, entry.target))
    return sorted(found[:MAX_LISTED_FILES], key=lambda f: f.name)


def _remote_entry(store: Storage, folder: str, name: str) -> Entry:
    try:
        size = store.size(f"{folder}/{name}")
    except OSError:
        size = 0
    return Entry(name, "file", size)


def open_artifact(attempt: Attempt, relative: str) -> File | None:
    """The one way to open a file of an attempt's folder for reading; None when it is absent,
    outside the folder, a link (or reached through one), or no regular file."""
    try:
        name = artifact_name(attempt, relative)
    except ArtifactPathError:
        return None
    store = storage()
    try:
        # exists() first: a remote storage may only fail on the first read of a missing file.
        if not store.exists(name):
            return None
        return store.open(name, "rb")
    except (OSError, SuspiciousFileOperation):  # LinkRefused is a FileNotFoundError
        return None


def read_tail(attempt: Attempt, relative: str, max_bytes: int = LOG_TAIL_BYTES) -> LogTail | None:
    """The last ``max_bytes`` of a file of the attempt, decoded leniently; None when absent."""
    handle = open_artifact(attempt, relative)
    if handle is None:
        return None
    with handle:
        size = handle.size
        if size > max_bytes:
            handle.seek(size - max_bytes)
        data = handle.read(max_bytes)
    text = data.decode("utf-8", errors="replace")
    truncated = size > max_bytes
    if truncated and "\n" in text:
        # Start on a whole line.
        text = text[text.index("\n") + 1 :]
    return LogTail(name=relative, size=size, text=text, truncated=truncated)


def read_trajectory(attempt: Attempt, relative: str = "events.jsonl") -> Trajectory | None:
    """The agent's events, one JSON object a line; unknown event types are kept as they are."""
    handle = open_artifact(attempt, relative)
    if handle is None:
        return None
    with handle:
        data = handle.read(EVENTS_MAX_BYTES + 1)
    truncated = len(data) > EVENTS_MAX_BYTES
    events: list[Event] = []
    bad = 0
    for line in data[:EVENTS_MAX_BYTES].decode("utf-8", errors="replace").splitlines():
        if not line.strip():
            continue
        if len(events) >= EVENTS_MAX:
            truncated = True
            break
        try:
            raw = json.loads(line)
        except ValueError:
            bad += 1
            continue
        if not isinstance(raw, dict):
            bad += 1
            continue
        events.append(_event(len(events), raw))
    return Trajectory(events=events, truncated=truncated, bad_lines=bad)


def read_bytes(attempt: Attempt, relative: str, max_bytes: int) -> bytes | None:
    """Up to ``max_bytes`` of one file of the attempt's folder; None when absent or outside."""
    handle = open_artifact(attempt, relative)
    if handle is None:
        return None
    with handle:
        return handle.read(max_bytes)


def read_transcript(attempt: Attempt) -> transcript.Transcript | None:
    """The attempt's conversation (``runs.transcript.load`` over its artifact folder)."""
    if not attempt_root(attempt):
        return None
    return transcript.load(
        lambda relative: read_bytes(attempt, relative, transcript.MAX_FILE_BYTES + 1)
    )


class AtifExportError(ValueError):
    """Our export did not pass the ATIF check (a bug of ours, named field by field)."""


def attempt_atif(attempt: Attempt) -> dict | None:
    """The attempt's transcript as an ATIF trajectory (Harbor's format), whole texts (not the
    page's cut), checked against the format; None when the attempt has no transcript or its
    file cannot be read. The same turns read back (``runs.transcript.parse_atif``)."""
    if not attempt_root(attempt):
        return None
    with transcript.full_blocks():
        found = read_transcript(attempt)
    if found is None or found.error:
        return None
    config = attempt.model_config
    document = transcript.to_atif(
        found,
        agent_name=config.name,
        agent_version=_agent_version(attempt, found),
        timestamps=_step_ends(attempt, found),
        session_id=str(attempt.public_id),
        extra={
            "attempt": str(attempt.public_id),
            "run": str(attempt.run.public_id),
            "suite": attempt.suite.name,
            "task_id": attempt.task.task_id,
            "sample": attempt.sample_index,
            "model_config": config.name,
            "agent_variant": config.agent_variant,
            "outcome": attempt.outcome,
            "failure_reason": attempt.failure_reason_id or "",
            # The patch travels with the turns, so an import of this file can evaluate it.
            "submission": found.submission or attempt.final_patch or "",
        },
    )
    if not document["agent"].get("model_name") and config.model_name:
        document["agent"]["model_name"] = config.model_name
    problems = transcript.atif.validate(document)
    if problems:
        raise AtifExportError("; ".join(problems))
    return document


def _agent_version(attempt: Attempt, found: transcript.Transcript) -> str:
    """The version of the program that made the turns: the trajectory's own (an imported
    mini-swe-agent run), else the agent CLI's pinned version, else this harness's."""
    if found.agent_version:
        return found.agent_version
    cli = attempt.model_config.cli_agent
    if cli:
        from runs.agent_clis import find_definition
        from runs.agents.cli.definition import DefinitionError

        try:
            return find_definition(cli).spec.install.version
        except DefinitionError:
            pass
    return attempt.run.harness_version or settings.HARNESS_VERSION


def _step_ends(attempt: Attempt, found: transcript.Transcript) -> dict[int, float]:
    """When each assistant turn's step ended, by turn index, where its file's clock is the
    wall clock (``runs.step_times``: the same times the page shows as durations)."""
    if found.file not in step_times.ABSOLUTE_CLOCKS:
        return {}
    times = step_times.load(
        lambda relative: read_bytes(attempt, relative, step_times.MAX_FILE_BYTES + 1), found
    )
    if times is None:
        return {}
    return {index: t.end for index, t in times.by_turn.items() if t.end is not None}


# What a download of an artifact says it is, by its name's ending: types a program that
# receives the file can act on (a download is always an attachment, never rendered in the
# site's origin, whatever it claims). Anything else is application/octet-stream.
DOWNLOAD_TYPES = {
    ".jsonl": "application/x-ndjson; charset=utf-8",
    ".json": "application/json",
    ".txt": "text/plain; charset=utf-8",
    ".log": "text/plain; charset=utf-8",
    ".diff": "text/x-diff; charset=utf-8",
    ".patch": "text/x-diff; charset=utf-8",
    ".yaml": "application/yaml",
    ".yml": "application/yaml",
}


def download_content_type(path: str) -> str:
    """The Content-Type of an artifact's download (``DOWNLOAD_TYPES``)."""
    name = posixpath.basename(path).lower()
    return next(
        (kind for ending, kind in DOWNLOAD_TYPES.items() if name.endswith(ending)),
        "application/octet-stream",
    )


def atif_file_name(attempt: Attempt) -> str:
    return f"{attempt.task.task_id}__{attempt.sample_index}.atif.json".replace('"', "")


def _text(value) -> str:
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, indent=2, default=str)
    if len(text) > EVENT_FIELD_MAX_CHARS:
        return text[:EVENT_FIELD_MAX_CHARS] + f"\n… ({len(text) - EVENT_FIELD_MAX_CHARS} more)"
    return text


_INPUT_KEYS = ("input", "args", "arguments", "command", "request", "messages", "params")
_OUTPUT_KEYS = ("output", "result", "stdout", "response", "content", "error", "stderr")
_META_KEYS = {
    "type",
    "event",
    "kind",
    "tool",
    "name",
    "ts",
    "time",
    "at",
    "timestamp",
    "t",
    "artifact",
}


def _event(index: int, raw: dict) -> Event:
    kind = str(raw.get("type") or raw.get("event") or raw.get("kind") or "event")
    tool = str(raw.get("tool") or raw.get("name") or "")
    at = str(raw.get("ts") or raw.get("time") or raw.get("at") or raw.get("timestamp") or "")
    if not at and isinstance(raw.get("t"), int | float):
        at = f"+{raw['t']:.1f} s"
    inputs = {k: raw[k] for k in _INPUT_KEYS if k in raw}
    outputs = {k: raw[k] for k in _OUTPUT_KEYS if k in raw}
    rest = {
        k: v for k, v in raw.items() if k not in _META_KEYS and k not in inputs and k not in outputs
    }
    summary_bits = [f"{k}={v}" for k, v in rest.items() if isinstance(v, int | float | bool | str)]
    summary = ", ".join(summary_bits)[:300]
    is_error = bool(raw.get("error")) or raw.get("ok") is False or raw.get("is_error") is True
    return Event(
        index=index,
        kind=kind,
        tool=tool,
        at=at,
        summary=summary,
        input=_text(next(iter(inputs.values()))) if len(inputs) == 1 else _text(inputs or None),
        output=_text(next(iter(outputs.values()))) if len(outputs) == 1 else _text(outputs or None),
        is_error=is_error,
        artifact=_artifact(raw.get("artifact")),
        raw=raw,
    )


def _artifact(value) -> str:
    """A relative path inside the attempt's folder, or "" (anything else is not linked)."""
    if not isinstance(value, str) or not value:
        return ""
    cleaned = posixpath.normpath(value.replace("\\", "/"))
    if cleaned.startswith(("/", "..")) or ".." in PurePosixPath(cleaned).parts:
        return ""
    return cleaned
