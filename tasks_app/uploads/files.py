"""Uploaded files for imports: size limits applied while the body streams in, and safe,
capped unpacking of task archives (tasks_app/uploads/archives.py)."""

import shutil
import tarfile
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from django.conf import settings
from django.core.files.uploadhandler import FileUploadHandler
from django.http import HttpRequest, HttpResponse, JsonResponse
from ninja import UploadedFile

from benchsite.api.errors import ApiInputError
from tasks_app.uploads.archives import ArchiveLimits, tar_members, zip_budget

ARCHIVE_SUFFIXES = (".zip", ".tar", ".tar.gz", ".tgz")
# What reading one zip member can raise: a corrupt member, a disk error, and - zipfile's way of
# saying it - NotImplementedError for a compression method it has no decoder for (AES, say).
ZIP_MEMBER_ERRORS = (zipfile.BadZipFile, OSError, NotImplementedError)


# A refused body is read and dropped up to this many times the limit, so the client hears the
# 413 instead of a reset connection; bigger ones are cut off.
DRAIN_FACTOR = 2
# Room for the form's other fields beside the file.
FORM_OVERHEAD_BYTES = 1024 * 1024
CHUNK = 1 << 20


class CappedUploadHandler(FileUploadHandler):
    """First of the request's upload handlers: counts the uploaded files' bytes as they arrive
    and stops the upload (413 naming the field) once they pass API_UPLOAD_MAX_BYTES, before
    the rest is read or written anywhere."""

    def __init__(self, request: HttpRequest, limit: int):
        super().__init__(request)
        self.limit = limit
        self.total = 0

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes:
        self.total += len(raw_data)
        if self.total > self.limit:
            self.request._upload_refused = True  # type: ignore[union-attr]
            self._close_unfinished_files()
            raise ApiInputError(
                self.field_name or "file",
                f"larger than API_UPLOAD_MAX_BYTES ({self.limit})",
                status=413,
            )
        return raw_data

    def _close_unfinished_files(self) -> None:
        """Close (and so delete) the file the next handlers are writing this part to.

        Django's parser closes the files already complete when a handler raises, but not the
        one still being written: that TemporaryUploadedFile stays referenced from the raised
        error's traceback, a reference cycle, and so open and on disk (up to the limit's size)
        until the garbage collector happens to run."""
        for handler in self.request.upload_handlers:  # type: ignore[union-attr]
            unfinished = getattr(handler, "file", None)
            if handler is not self and unfinished is not None:
                unfinished.close()

    def file_complete(self, file_size: int) -> None:
        return None  # the next handler (memory or temporary file) makes the file


class UploadLimitMiddleware:
    """API uploads: a body whose Content-Length is over API_UPLOAD_MAX_BYTES is refused (413)
    before it is read; any other multipart body is counted as it streams in
    (``CappedUploadHandler``). Either way the refused rest is read and dropped in chunks, never
    held, so the client gets the answer."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not (request.method == "POST" and request.path.startswith("/api/")):
            return self.get_response(request)
        limit = settings.API_UPLOAD_MAX_BYTES
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        if length > limit + FORM_OVERHEAD_BYTES:
            _drain(request, limit)
            message = f"larger than API_UPLOAD_MAX_BYTES ({limit})"
            return JsonResponse(
                {
                    "detail": f"file: {message}",
                    "errors": [{"field": "file", "location": "body", "message": message}],
                },
                status=413,
            )
        if request.content_type == "multipart/form-data":
            request.upload_handlers.insert(0, CappedUploadHandler(request, limit))
        response = self.get_response(request)
        if getattr(request, "_upload_refused", False):
            _drain(request, limit)
        return response


def _drain(request: HttpRequest, limit: int) -> None:
    stream = request._stream  # type: ignore[attr-defined]  # the WSGI input, length-limited
    budget = limit * DRAIN_FACTOR
    while budget > 0 and (chunk := stream.read(min(CHUNK, budget))):
        budget -= len(chunk)


def read_upload(upload: UploadedFile) -> bytes:
    """The whole file, after checking it is within API_UPLOAD_MAX_BYTES."""
    check_upload_size(upload)
    return upload.read()


def upload_source(upload: UploadedFile) -> Path | bytes:
    """The file for an importer that reads paths: where Django spooled it on disk (a large
    upload, read from there line by line), else its bytes (a small one, in memory already)."""
    check_upload_size(upload)
    temporary = getattr(upload, "temporary_file_path", None)
    return Path(temporary()) if temporary is not None else upload.read()


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
        # An upload always has its file; django-stubs types it optional.
        archive = zipfile.ZipFile(upload.file)  # type: ignore[arg-type]
    except zipfile.BadZipFile as exc:
        raise ApiInputError("file", f"not a valid zip archive: {exc}") from None
    with archive:
        budget = zip_budget(archive, ArchiveLimits.from_settings())
        for member in archive.infolist():
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
                    budget.copy(member.filename, src, out)
            except ZIP_MEMBER_ERRORS as exc:
                raise ApiInputError("file", f"cannot read {member.filename!r}: {exc}") from None


def _untar(upload: UploadedFile, target: Path) -> None:
    try:
        archive = tarfile.open(fileobj=upload.file, mode="r:*")  # noqa: SIM115 (closed below)
    except tarfile.TarError as exc:
        raise ApiInputError("file", f"not a valid tar archive: {exc}") from None
    with archive:
        try:
            members, budget = tar_members(archive, ArchiveLimits.from_settings())
        except (tarfile.TarError, EOFError, OSError, zlib.error) as exc:
            raise ApiInputError("file", f"not a valid tar archive: {exc}") from None
        for member in members:
            _safe_member(member.name)
            if not (member.isfile() or member.isdir()):
                raise ApiInputError("file", f"archive member {member.name!r} is not a plain file")
        try:
            for member in members:
                destination = target.joinpath(*_safe_member(member.name).parts)
                if member.isdir():
                    destination.mkdir(parents=True, exist_ok=True)
                    continue
                destination.parent.mkdir(parents=True, exist_ok=True)
                src = archive.extractfile(member)
                assert src is not None  # a regular file, checked above
                with src, open(destination, "wb") as out:
                    budget.copy(member.name, src, out)
                destination.chmod(0o644 | (member.mode & 0o111))
        except (tarfile.TarError, EOFError, OSError, zlib.error) as exc:
            raise ApiInputError("file", f"cannot unpack the archive: {exc}") from None
