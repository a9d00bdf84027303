"""Reading an Inspect AI log without Inspect: an ``.eval`` zip of JSON files, or a ``.json``.

The documented layout: ``header.json`` (``eval``: task, model, created; ``results``),
``samples/<id>_epoch_<n>.json`` (one sample each: ``id``, ``epoch``, ``messages``, ``scores``,
``model_usage``, ``error``, ``limit``), ``summaries.json``, ``reductions.json`` and a
``_journal/`` folder. Members are read one at a time. Inspect compresses them with zstd
(zip method 93) since 2025, which Python's ``zipfile`` cannot read before 3.14; such a
member is decompressed as a stream with ``zstandard``.

The single-file ``.json`` format (``log_format="json"``) is one object: ``version``, ``status``,
``eval`` (the header's spec), ``plan``, ``results``, ``stats`` and ``samples``, a list of the
same sample objects. A sample has no file of its own there: it is named ``samples[<i>]`` and
stored as its JSON (``sample_bytes``), the same bytes at reading and at copying.
"""

from __future__ import annotations

import io
import json
import struct
import zipfile
from pathlib import Path
from typing import IO, cast

ZIP_ZSTANDARD = 93
SAMPLES_PREFIX = "samples/"
_LOCAL_HEADER = struct.Struct("<4s5H3L2H")  # the zip local file header, 30 bytes


class EvalLogError(ValueError):
    """Not a readable .eval log (not a zip, or a member that cannot be read)."""


def is_json_log(data: object) -> bool:
    """An Inspect log in the single-file JSON format: its ``version``, ``eval`` spec, samples."""
    return (
        isinstance(data, dict)
        and isinstance(data.get("version"), int)
        and isinstance(data.get("eval"), dict)
        and "task" in data["eval"]
        and isinstance(data.get("samples", []), list)
    )


def json_member(index: int) -> str:
    """The name of a .json log's ``index``-th sample (as a zip member names an .eval's)."""
    return f"samples[{index}]"


def json_member_index(member: str) -> int | None:
    """``json_member``'s index back, None for a zip member's name."""
    if member.startswith("samples[") and member.endswith("]"):
        return int(member[len("samples[") : -1])
    return None


def sample_bytes(sample: object) -> bytes:
    """A .json log's sample as stored: its JSON, keys in the log's order."""
    return json.dumps(sample, ensure_ascii=False).encode()


def sample_members(path: Path) -> list[zipfile.ZipInfo]:
    """The sample members of an .eval log, in archive order."""
    try:
        with zipfile.ZipFile(path) as archive:
            return [
                info
                for info in archive.infolist()
                if info.filename.startswith(SAMPLES_PREFIX) and info.filename.endswith(".json")
            ]
    except (zipfile.BadZipFile, OSError) as exc:
        raise EvalLogError(f"not a readable .eval (zip) log: {exc}") from None


def read_member(path: Path, info: zipfile.ZipInfo, max_bytes: int) -> bytes:
    """One member's bytes, refusing more than ``max_bytes`` once decompressed."""
    with open_member(path, info) as handle:
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise EvalLogError(f"{info.filename} is larger than {max_bytes} bytes")
    return data


def read_header(path: Path, max_bytes: int) -> bytes | None:
    try:
        with zipfile.ZipFile(path) as archive:
            info = archive.getinfo("header.json")
    except KeyError:
        return None
    except (zipfile.BadZipFile, OSError) as exc:
        raise EvalLogError(f"not a readable .eval (zip) log: {exc}") from None
    return read_member(path, info, max_bytes)


def open_member(path: Path, info: zipfile.ZipInfo) -> IO[bytes]:
    """A binary stream of one member's content, decompressed."""
    if info.compress_type != ZIP_ZSTANDARD:
        archive = zipfile.ZipFile(path)
        try:
            return cast(IO[bytes], _Closing(archive.open(info), archive))
        except (zipfile.BadZipFile, NotImplementedError, OSError) as exc:
            archive.close()
            raise EvalLogError(f"cannot read {info.filename}: {exc}") from None
    import zstandard

    raw = open(path, "rb")  # noqa: SIM115 (closed with the returned stream)
    try:
        raw.seek(info.header_offset)
        fields = _LOCAL_HEADER.unpack(raw.read(_LOCAL_HEADER.size))
        if fields[0] != b"PK\x03\x04":
            raise EvalLogError(f"{info.filename}: bad local header")
        name_length, extra_length = fields[-2], fields[-1]
        raw.seek(info.header_offset + _LOCAL_HEADER.size + name_length + extra_length)
        compressed = cast(IO[bytes], _Bounded(raw, info.compress_size))
        reader = zstandard.ZstdDecompressor().stream_reader(compressed, read_across_frames=True)
        return cast(IO[bytes], _Closing(reader, raw))
    except (OSError, struct.error) as exc:
        raw.close()
        raise EvalLogError(f"cannot read {info.filename}: {exc}") from None


class _Bounded(io.RawIOBase):
    """At most ``size`` bytes of ``handle`` from where it stands."""

    def __init__(self, handle: IO[bytes], size: int):
        self._handle, self._left = handle, size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def]
        want = min(len(buffer), self._left)
        if want <= 0:
            return 0
        data = self._handle.read(want)
        buffer[: len(data)] = data
        self._left -= len(data)
        return len(data)


class _Closing(io.RawIOBase):
    """A read stream that also closes what it was opened from."""

    def __init__(self, stream, owner):  # type: ignore[no-untyped-def]
        self._stream, self._owner = stream, owner

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            chunks = []
            while chunk := self._stream.read(1 << 20):
                chunks.append(chunk)
            return b"".join(chunks)
        return self._stream.read(size)

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def]
        data = self._stream.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        try:
            self._stream.close()
        finally:
            self._owner.close()
            super().close()
