"""The local artifacts storage never follows a link (runs/artifact_storage.py): what each
storage method does with links, FIFOs and names that leave the folder, on a real folder.
The attack through a real sandbox is tests/runs/pipeline/test_security_artifacts.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.core.exceptions import SuspiciousFileOperation
from django.core.files.base import ContentFile
from django.core.files.storage import FileSystemStorage

from runs.artifact_storage import ArtifactStorage, Entry, LinkRefused


@pytest.fixture
def host(tmp_path: Path) -> Path:
    """A folder outside the storage, standing for the host's files."""
    folder = tmp_path / "host"
    folder.mkdir()
    (folder / "secret.txt").write_text("host secret\n")
    return folder


@pytest.fixture
def store(tmp_path: Path, host: Path) -> ArtifactStorage:
    root = tmp_path / "artifacts"
    ws = root / "run" / "task__0" / "workspace"
    ws.mkdir(parents=True)
    (ws / "real.txt").write_text("real\n")
    (ws / "leak").symlink_to(host / "secret.txt")
    (ws / "into").symlink_to(host)
    (ws / "dangling").symlink_to(host / "missing")
    os.mkfifo(ws / "fifo")
    return ArtifactStorage(location=str(root))


WS = "run/task__0/workspace"


def test_it_reads_a_regular_file(store: ArtifactStorage) -> None:
    with store.open(f"{WS}/real.txt") as handle:
        assert handle.read() == b"real\n"
        assert handle.size == 5


@pytest.mark.parametrize("name", ["leak", "into/secret.txt", "dangling", "fifo", "into"])
def test_it_refuses_a_link_a_name_through_one_and_a_fifo(store: ArtifactStorage, name: str) -> None:
    with pytest.raises(LinkRefused):
        store.open(f"{WS}/{name}")


def test_what_plain_file_system_storage_does_instead(store: ArtifactStorage) -> None:
    # The reason for the class: Django's own storage serves the host's file.
    plain = FileSystemStorage(location=store.location)
    with plain.open(f"{WS}/into/secret.txt") as handle:
        assert handle.read() == b"host secret\n"


@pytest.mark.parametrize("name", ["../host/secret.txt", "/etc/hostname", "run/../../host"])
def test_it_refuses_a_name_that_leaves_the_folder(store: ArtifactStorage, name: str) -> None:
    with pytest.raises(SuspiciousFileOperation):
        store.open(name)
    assert store.exists(name) is False


def test_it_lists_links_as_links_and_never_enters_a_folder_through_one(
    store: ArtifactStorage, host: Path
) -> None:
    entries = {e.name: e for e in store.entries(WS)}
    assert entries["leak"] == Entry(
        "leak", "link", len(str(host / "secret.txt")), str(host / "secret.txt")
    )
    assert entries["into"].kind == "link" and entries["into"].target == str(host)
    assert entries["real.txt"] == Entry("real.txt", "file", 5)
    assert entries["fifo"].kind == "other"
    assert store.listdir(WS) == ([], ["dangling", "fifo", "into", "leak", "real.txt"])
    with pytest.raises(LinkRefused):
        store.entries(f"{WS}/into")
    assert store.link_target(f"{WS}/leak") == str(host / "secret.txt")
    assert store.link_target(f"{WS}/real.txt") is None


def test_sizes_and_times_are_the_links_own(store: ArtifactStorage, host: Path) -> None:
    assert store.exists(f"{WS}/leak") and store.exists(f"{WS}/dangling")
    assert store.size(f"{WS}/leak") == len(str(host / "secret.txt"))
    assert not store.exists(f"{WS}/into/secret.txt")
    with pytest.raises(LinkRefused):
        store.size(f"{WS}/into/secret.txt")
    assert store.get_modified_time(f"{WS}/leak").timestamp() == pytest.approx(
        os.lstat(Path(store.location) / WS / "leak").st_mtime
    )


def test_delete_removes_the_link_never_its_target(store: ArtifactStorage, host: Path) -> None:
    store.delete(f"{WS}/leak")
    assert not os.path.lexists(Path(store.location) / WS / "leak")
    assert (host / "secret.txt").read_text() == "host secret\n"
    with pytest.raises(LinkRefused):
        store.delete(f"{WS}/into/secret.txt")
    assert (host / "secret.txt").exists()


def test_it_never_writes_through_a_link(store: ArtifactStorage, host: Path) -> None:
    with pytest.raises(LinkRefused):
        store.save(f"{WS}/into/planted.txt", ContentFile(b"x"))
    assert not (host / "planted.txt").exists()
    saved = store.save(f"{WS}/new/dir/ok.txt", ContentFile(b"ok"))
    assert (Path(store.location) / saved).read_bytes() == b"ok"


def test_the_artifacts_reader_wraps_a_plain_file_system_storage(settings, tmp_path) -> None:
    from django.core.files.storage import storages

    from runs import artifacts

    settings.STORAGES = settings.STORAGES | {
        "artifacts": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(tmp_path)},
        }
    }
    try:
        store = artifacts.storage()
        assert isinstance(store, ArtifactStorage) and store.location == str(tmp_path)
    finally:
        storages._storages.pop("artifacts", None)


def test_the_default_artifacts_storage_follows_no_link() -> None:
    from django.conf import settings

    backend = settings.STORAGES["artifacts"]["BACKEND"]
    assert backend == "runs.artifact_storage.ArtifactStorage"
