"""Reading an attempt's artifact files (stage logs, diffs, events.jsonl) for the pages.

Everything goes through ``storages["artifacts"]`` so a remote storage works the same. Large
files are never read whole: pages show a tail and offer the download.
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from django.conf import settings
from django.core.files.storage import Storage, storages

from runs import transcript
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
    return storages["artifacts"]


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
    """Every file under the attempt's folder (breadth-first, capped), sorted by name."""
    root = attempt_root(attempt)
    if not root:
        return []
    store = storage()
    found: list[ArtifactFile] = []
    pending = [""]
    while pending and len(found) < MAX_LISTED_FILES:
        prefix = pending.pop(0)
        try:
            dirs, files = store.listdir(f"{root}/{prefix}".rstrip("/"))
        except (FileNotFoundError, NotADirectoryError):
            continue
        for name in sorted(files):
            relative = f"{prefix}{name}"
            try:
                size = store.size(f"{root}/{relative}")
            except OSError:
                size = 0
            found.append(ArtifactFile(relative, size))
        pending.extend(f"{prefix}{d}/" for d in sorted(dirs))
    return sorted(found[:MAX_LISTED_FILES], key=lambda f: f.name)


def read_tail(name: str, max_bytes: int = LOG_TAIL_BYTES) -> LogTail | None:
    """The last ``max_bytes`` of a stored file, decoded leniently; None when it is absent."""
    store = storage()
    try:
        size = store.size(name)
    except (FileNotFoundError, OSError):
        return None
    with store.open(name, "rb") as handle:
        if size > max_bytes:
            handle.seek(size - max_bytes)
        data = handle.read(max_bytes)
    text = data.decode("utf-8", errors="replace")
    truncated = size > max_bytes
    if truncated and "\n" in text:
        # Start on a whole line.
        text = text[text.index("\n") + 1 :]
    return LogTail(name=name, size=size, text=text, truncated=truncated)


def read_trajectory(attempt: Attempt, relative: str = "events.jsonl") -> Trajectory | None:
    """The agent's events, one JSON object a line; unknown event types are kept as they are."""
    try:
        name = artifact_name(attempt, relative)
    except ArtifactPathError:
        return None
    store = storage()
    if not store.exists(name):
        return None
    with store.open(name, "rb") as handle:
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
    try:
        name = artifact_name(attempt, relative)
    except ArtifactPathError:
        return None
    store = storage()
    # exists() first: a remote storage may only fail on the first read of a missing file.
    if not store.exists(name):
        return None
    try:
        with store.open(name, "rb") as handle:
            return handle.read(max_bytes)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None


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
        agent_version=attempt.run.harness_version or settings.HARNESS_VERSION,
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
