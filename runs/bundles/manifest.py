"""The bundle's archive: a .tar.gz whose ``manifest.json`` lists every other file with its
sha256 and size. Written from memory, read back under the upload caps
(``tasks_app.uploads.archives``): a member over a cap, a link, a name leaving the bundle, a
file missing from the manifest or one whose checksum differs is refused, naming the file.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import IO

from tasks_app.uploads.archives import ArchiveLimitError, ArchiveLimits, tar_members

FORMAT = "agentbench-run-bundle"
VERSION = 1
MANIFEST = "manifest.json"


class BundleError(ValueError):
    """A bundle that cannot be read or trusted; ``member`` names the file at fault."""

    def __init__(self, message: str, member: str = ""):
        super().__init__(message)
        self.member = member


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def manifest_bytes(files: Mapping[str, bytes], meta: Mapping) -> bytes:
    """The manifest of ``files`` (checksums of the bytes as written), with ``meta``'s keys."""
    listed = {name: {"sha256": sha256(data), "bytes": len(data)} for name, data in files.items()}
    record = {"format": FORMAT, "version": VERSION, **meta, "files": dict(sorted(listed.items()))}
    return json.dumps(record, indent=2, sort_keys=True).encode()


def write_bundle(out: IO[bytes], files: Mapping[str, bytes], meta: Mapping) -> int:
    """Write the archive (the manifest first) to ``out``; returns the number of files."""
    with tarfile.open(fileobj=out, mode="w:gz") as archive:
        for name, data in [(MANIFEST, manifest_bytes(files, meta)), *sorted(files.items())]:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            archive.addfile(info, io.BytesIO(data))
    return len(files) + 1


def _safe_name(name: str) -> bool:
    path = PurePosixPath(name)
    return bool(name) and not path.is_absolute() and ".." not in path.parts and "\\" not in name


def read_bundle(source: IO[bytes], limits: ArchiveLimits) -> tuple[dict, dict[str, bytes]]:
    """The manifest and every file of the archive, verified against the manifest."""
    try:
        archive = tarfile.open(fileobj=source, mode="r:*")  # noqa: SIM115  # closed below
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise BundleError(f"not a bundle (.tar.gz): {exc}") from None
    files: dict[str, bytes] = {}
    with archive:
        try:
            members, budget = tar_members(archive, limits)
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise BundleError(f"the archive is damaged: {exc}") from None
        except ArchiveLimitError as exc:
            raise BundleError(str(exc), exc.member) from None
        for member in members:
            if member.isdir():
                continue
            if not member.isfile() or not _safe_name(member.name):
                raise BundleError(f"{member.name}: not a plain file inside the bundle", member.name)
            handle = archive.extractfile(member)
            assert handle is not None  # a regular file
            try:
                files[member.name] = budget.read(member.name, handle)
            except ArchiveLimitError as exc:
                raise BundleError(str(exc), exc.member) from None
    manifest = _manifest(files.pop(MANIFEST, None))
    _verify(manifest["files"], files)
    return manifest, files


def _manifest(data: bytes | None) -> dict:
    if data is None:
        raise BundleError(f"{MANIFEST} is missing: not a run bundle", MANIFEST)
    try:
        manifest = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BundleError(f"{MANIFEST}: not JSON ({exc})", MANIFEST) from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BundleError(f"{MANIFEST}: format is not {FORMAT!r}", MANIFEST)
    if manifest.get("version") != VERSION:
        raise BundleError(
            f"{MANIFEST}: version {manifest.get('version')!r}; this installation reads {VERSION}",
            MANIFEST,
        )
    if not isinstance(manifest.get("files"), dict):
        raise BundleError(f"{MANIFEST}: files must be a mapping", MANIFEST)
    return manifest


def _verify(listed: dict, files: dict[str, bytes]) -> None:
    for name in sorted(set(files) - set(listed)):
        raise BundleError(f"{name}: in the bundle but not in {MANIFEST}", name)
    for name, entry in sorted(listed.items()):
        if name not in files:
            raise BundleError(f"{name}: listed in {MANIFEST} but missing", name)
        expected = entry.get("sha256") if isinstance(entry, dict) else None
        if sha256(files[name]) != expected:
            raise BundleError(
                f"{name}: checksum differs from {MANIFEST} (the bundle was changed)", name
            )
