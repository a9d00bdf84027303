"""Uploaded files for imports: size limits and safe unpacking of task archives."""

import shutil
import tarfile
import zipfile
from pathlib import Path, PurePosixPath

from django.conf import settings
from ninja import UploadedFile

from benchsite.api_errors import ApiInputError

ARCHIVE_SUFFIXES = (".zip", ".tar", ".tar.gz", ".tgz")
MAX_ARCHIVE_MEMBERS = 10_000
# What reading one zip member can raise: a corrupt member, a disk error, and - zipfile's way of
# saying it - NotImplementedError for a compression method it has no decoder for (AES, say).
ZIP_MEMBER_ERRORS = (zipfile.BadZipFile, OSError, NotImplementedError)


def read_upload(upload: UploadedFile) -> bytes:
    """The whole file, after checking it is within API_UPLOAD_MAX_BYTES."""
    check_upload_size(upload)
    return upload.read()


def check_upload_size(upload: UploadedFile) -> None:
    if upload.size is not None and upload.size > settings.API_UPLOAD_MAX_BYTES:
        limit = settings.API_UPLOAD_MAX_BYTES
        raise ApiInputError("file", f"larger than API_UPLOAD_MAX_BYTES ({limit})", status=413)


def unpack_upload(upload: UploadedFile, target: Path) -> None:
    """Unpack an uploaded archive (or a single task.yaml) into ``target``, refusing any member
    that would land outside it, links and oversized contents."""
    check_upload_size(upload)
    name = (upload.name or "").lower()
    target.mkdir(parents=True, exist_ok=False)
    try:
        if name.endswith((".yaml", ".yml")):
            with open(target / "task.yaml", "wb") as out:
                for chunk in upload.chunks():
                    out.write(chunk)
        elif name.endswith(".zip"):
            _unzip(upload, target)
        elif name.endswith((".tar", ".tar.gz", ".tgz")):
            _untar(upload, target)
        else:
            raise ApiInputError(
                "file", f"expected a task.yaml or an archive ({', '.join(ARCHIVE_SUFFIXES)})"
            )
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        raise


def _safe_member(name: str) -> PurePosixPath:
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or "\x00" in name:
        raise ApiInputError("file", f"archive member {name!r} would land outside the archive")
    return path


def _unzip(upload: UploadedFile, target: Path) -> None:
    try:
        archive = zipfile.ZipFile(upload.file)
    except zipfile.BadZipFile as exc:
        raise ApiInputError("file", f"not a valid zip archive: {exc}") from None
    with archive:
        members = archive.infolist()
        if len(members) > MAX_ARCHIVE_MEMBERS:
            raise ApiInputError("file", f"more than {MAX_ARCHIVE_MEMBERS} files in the archive")
        if sum(m.file_size for m in members) > settings.API_UPLOAD_MAX_BYTES:
            raise ApiInputError("file", "unpacked size exceeds API_UPLOAD_MAX_BYTES", status=413)
        for member in members:
            relative = _safe_member(member.filename)
            if (member.external_attr >> 16) & 0o170000 == 0o120000:
                raise ApiInputError("file", f"archive member {member.filename!r} is a link")
            destination = target.joinpath(*relative.parts)
            if member.is_dir():
                destination.mkdir(parents=True, exist_ok=True)
                continue
            destination.parent.mkdir(parents=True, exist_ok=True)
            try:
                with archive.open(member) as src, open(destination, "wb") as out:
                    shutil.copyfileobj(src, out)
            except ZIP_MEMBER_ERRORS as exc:
                raise ApiInputError("file", f"cannot read {member.filename!r}: {exc}") from None


def _untar(upload: UploadedFile, target: Path) -> None:
    try:
        archive = tarfile.open(fileobj=upload.file, mode="r:*")  # noqa: SIM115 (closed below)
    except tarfile.TarError as exc:
        raise ApiInputError("file", f"not a valid tar archive: {exc}") from None
    with archive:
        try:
            members = archive.getmembers()
        except (tarfile.TarError, EOFError, OSError) as exc:
            raise ApiInputError("file", f"not a valid tar archive: {exc}") from None
        if len(members) > MAX_ARCHIVE_MEMBERS:
            raise ApiInputError("file", f"more than {MAX_ARCHIVE_MEMBERS} files in the archive")
        if sum(m.size for m in members) > settings.API_UPLOAD_MAX_BYTES:
            raise ApiInputError("file", "unpacked size exceeds API_UPLOAD_MAX_BYTES", status=413)
        for member in members:
            _safe_member(member.name)
            if not (member.isfile() or member.isdir()):
                raise ApiInputError("file", f"archive member {member.name!r} is not a plain file")
        try:
            # The "data" filter also refuses absolute paths, escapes and special files.
            archive.extractall(target, members=members, filter="data")
        except (tarfile.TarError, EOFError, OSError) as exc:
            raise ApiInputError("file", f"cannot unpack the archive: {exc}") from None
