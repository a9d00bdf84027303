"""Caps on what opening an archive may cost: members, bytes per member, bytes in total.

Every archive the app opens from outside (uploaded task archives, published results as a zip)
goes through these: the sizes an archive declares are checked before anything is decompressed,
and the bytes actually produced are counted while reading, so neither a lying header nor a
zip bomb (1 MB that inflates to gigabytes) gets past the limit. A refusal names the member.
"""

from __future__ import annotations

import io
import tarfile
import zipfile
from dataclasses import dataclass
from typing import IO

from django.conf import settings

CHUNK = 1 << 20


class ArchiveLimitError(ValueError):
    """An archive over one of the caps; ``member`` names the file (empty for the count)."""

    def __init__(self, message: str, member: str = ""):
        super().__init__(message)
        self.member = member


@dataclass(frozen=True, slots=True)
class ArchiveLimits:
    members: int
    member_bytes: int
    total_bytes: int

    @classmethod
    def from_settings(cls) -> ArchiveLimits:
        return cls(
            members=settings.API_ARCHIVE_MAX_MEMBERS,
            member_bytes=settings.API_ARCHIVE_MEMBER_MAX_BYTES,
            total_bytes=settings.API_ARCHIVE_TOTAL_MAX_BYTES,
        )


class Budget:
    """The bytes one archive may still produce, spent while reading its members."""

    def __init__(self, limits: ArchiveLimits):
        self.limits = limits
        self.left = limits.total_bytes

    def check_declared(self, members: list[tuple[str, int]]) -> None:
        """Refuse before decompressing when the archive's own header sizes are over a cap."""
        limits = self.limits
        if len(members) > limits.members:
            raise ArchiveLimitError(
                f"more than API_ARCHIVE_MAX_MEMBERS ({limits.members}) files in the archive"
            )
        total = 0
        for name, size in members:
            self._check_member(name, size)
            total += size
            if total > limits.total_bytes:
                raise ArchiveLimitError(
                    f"unpacked size exceeds API_ARCHIVE_TOTAL_MAX_BYTES ({limits.total_bytes}) "
                    f"at member {name!r}",
                    name,
                )

    def _check_member(self, name: str, size: int) -> None:
        if size > self.limits.member_bytes:
            raise ArchiveLimitError(
                f"archive member {name!r} unpacks to over API_ARCHIVE_MEMBER_MAX_BYTES "
                f"({self.limits.member_bytes})",
                name,
            )

    def copy(self, name: str, src: IO[bytes], out: IO[bytes]) -> None:
        """Copy one member's bytes, counting them against both caps as they come."""
        written = 0
        while chunk := src.read(CHUNK):
            written += len(chunk)
            self._check_member(name, written)
            self.left -= len(chunk)
            if self.left < 0:
                raise ArchiveLimitError(
                    f"unpacked size exceeds API_ARCHIVE_TOTAL_MAX_BYTES "
                    f"({self.limits.total_bytes}) at member {name!r}",
                    name,
                )
            out.write(chunk)

    def read(self, name: str, src: IO[bytes]) -> bytes:
        """One member's bytes in memory (small files: results, patches), capped the same way."""
        buffer = io.BytesIO()
        self.copy(name, src, buffer)
        return buffer.getvalue()


def zip_budget(archive: zipfile.ZipFile, limits: ArchiveLimits) -> Budget:
    budget = Budget(limits)
    budget.check_declared([(m.filename, m.file_size) for m in archive.infolist()])
    return budget


def tar_members(
    archive: tarfile.TarFile, limits: ArchiveLimits
) -> tuple[list[tarfile.TarInfo], Budget]:
    """The members of a tar, checked header by header as the stream is read: a member over a
    cap stops the scan there, before the rest of a compressed bomb is inflated."""
    members: list[tarfile.TarInfo] = []
    declared = 0
    budget = Budget(limits)
    for member in archive:
        members.append(member)
        declared += member.size
        budget.check_declared([(member.name, member.size)])
        if len(members) > limits.members:
            budget.check_declared([(m.name, 0) for m in members])
        if declared > limits.total_bytes:
            budget.check_declared([(m.name, m.size) for m in members])
    return members, budget
