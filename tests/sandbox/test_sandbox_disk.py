"""The sandbox's quota filesystem (sandbox/disk.py) at close: it drops its own cached writes
by shutting itself down before the unmount, and never shuts down a filesystem it did not make.

A stand-in "host" filesystem (another quota disk) holds the disk root here, so that a shutdown
aimed at the wrong filesystem would hit the stand-in, not this machine's disk.
"""

from __future__ import annotations

from pathlib import Path

from sandbox import mounts
from sandbox.disk import SandboxDisk, remove_leftover


def _writable(folder: Path) -> bool:
    probe = folder / "probe.txt"
    try:
        probe.write_text("still here\n")
        return probe.read_text() == "still here\n"
    except OSError:
        return False


def test_it_never_shuts_down_a_filesystem_it_did_not_make(tmp_path: Path, monkeypatch) -> None:
    host = SandboxDisk("ab-test-standin-host", 64, root=tmp_path / "disks")
    host.create(_empty(tmp_path / "host-ws"))
    try:
        root = host.workspace / "sandbox-disks"
        root.mkdir()
        monkeypatch.setenv("SANDBOX_DISK_ROOT", str(root))
        # A crashed worker's leftover: the mountpoint folder is there, nothing is mounted on it,
        # so it lies on the stand-in host filesystem.
        (root / "ab-attempt-crashed").mkdir()
        remove_leftover("ab-attempt-crashed", None)
        assert not (root / "ab-attempt-crashed").exists()
        assert _writable(host.workspace)
        # Something is mounted there, but not this name's image: a folder of the stand-in.
        (root / "ab-attempt-bound").mkdir()
        mounts.bind(_empty(host.workspace / "elsewhere"), root / "ab-attempt-bound")
        remove_leftover("ab-attempt-bound", None)
        assert not (root / "ab-attempt-bound").exists()
        assert _writable(host.workspace)
        # Its own disk, made and removed on the stand-in, leaves nothing and the stand-in works.
        mine = SandboxDisk("ab-attempt-mine", 64)
        mine.create(_empty(tmp_path / "mine-ws"))
        assert _writable(mine.workspace)
        mine.remove(workspace=tmp_path / "mine-ws")
        assert not mine.image.exists() and not mine.mountpoint.exists()
        assert _writable(host.workspace)
    finally:
        host.remove(workspace=tmp_path / "host-ws")


def test_it_copies_the_tree_back_before_it_drops_its_writes(tmp_path: Path) -> None:
    ws = _empty(tmp_path / "ws")
    (ws / "before.txt").write_text("before\n")
    disk = SandboxDisk("ab-test-copy-back", 64, root=tmp_path / "disks")
    disk.create(ws)
    (ws / "made.txt").write_text("made on the quota\n")
    (ws / "big.bin").write_bytes(b"x" * 8_000_000)  # still cached, not yet in the image
    disk.remove(workspace=ws, copy_back=True)
    assert (ws / "before.txt").read_text() == "before\n"
    assert (ws / "made.txt").read_text() == "made on the quota\n"
    assert (ws / "big.bin").stat().st_size == 8_000_000
    assert not disk.image.exists() and not disk.mountpoint.exists()


def _empty(folder: Path) -> Path:
    folder.mkdir(parents=True)
    return folder
