"""The Docker image of an upper level: what its tree changed over the tree below, loaded as
one layer on top of the image below.

``tree_diff`` finds the changes: files whose inode differs from the lower tree's and whose
type, owner, mode, size or mtime differs too (the hard-link copy shares every untouched file,
so most entries are settled by their inode, with no ``stat``), and the paths gone. The layer
is a tar of the changed paths (GNU tar, from a list) plus an OCI whiteout (``.wh.<name>``)
for each path gone; ``docker load`` takes it with an image config naming the layers below by
their diff ids (the engine has them: it reads only the new one). One write of the layer and
one unpack by the engine, where ``docker build`` with ``ADD`` unpacked it into a container,
tarred the container's changes and unpacked them again, with a container per instruction.
Engines on the containerd image store want every layer in a loaded archive: there the image is
still built that way (``build_on``).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shlex
import stat
import subprocess
import tarfile
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from sandbox.environments.trees import BuildStepError

WHITEOUT = ".wh."


def tree_diff(lower: Path, upper: Path) -> tuple[list[str], list[str]]:
    """(paths new or changed in ``upper``, paths gone from it), relative, parents first."""
    changed: list[str] = []
    removed: list[str] = []
    same_device = os.lstat(lower).st_dev == os.lstat(upper).st_dev
    _diff_folder(lower, upper, "", True, same_device, changed, removed)
    return changed, removed


def _diff_folder(
    lower: Path,
    upper: Path,
    rel: str,
    lower_is_folder: bool,
    same_device: bool,
    changed: list,
    removed: list,
) -> None:
    """Compare folder ``rel`` of both trees. ``lower_is_folder``: the lower tree has a folder
    there (not a file or a link, which a scan would follow: out of the tree, maybe)."""
    with os.scandir(upper / rel if rel else upper) as found:
        new_entries = {entry.name: entry for entry in found}
    old_entries = {}
    if lower_is_folder:
        with os.scandir(lower / rel if rel else lower) as found:
            old_entries = {entry.name: entry for entry in found}
    removed += [os.path.join(rel, name) for name in sorted(old_entries.keys() - new_entries)]
    for name in sorted(new_entries):
        new, old = new_entries[name], old_entries.get(name)
        path = os.path.join(rel, name)
        if _is_change(old, new, same_device):
            changed.append(path)
        if new.is_dir(follow_symlinks=False):
            below = old is not None and old.is_dir(follow_symlinks=False)
            _diff_folder(lower, upper, path, below, same_device, changed, removed)


def _is_change(old: os.DirEntry | None, new: os.DirEntry, same_device: bool) -> bool:
    if old is None:
        return True
    if same_device and new.inode() == old.inode():
        return False  # the same file (a hard link): no stat needed
    return _differs(old, new)


def _differs(old: os.DirEntry, new: os.DirEntry) -> bool:
    before, after = old.stat(follow_symlinks=False), new.stat(follow_symlinks=False)
    if stat.S_IFMT(before.st_mode) != stat.S_IFMT(after.st_mode):
        return True
    owner = (before.st_mode, before.st_uid, before.st_gid)
    if owner != (after.st_mode, after.st_uid, after.st_gid):
        return True
    if stat.S_ISDIR(after.st_mode):
        return False  # its entries are compared one by one
    if stat.S_ISLNK(after.st_mode):
        return os.readlink(old.path) != os.readlink(new.path)
    return (before.st_size, before.st_mtime_ns) != (after.st_size, after.st_mtime_ns)


def write_layer(upper: Path, changed: list[str], removed: list[str], layer: Path) -> int:
    """Write the layer tar at ``layer``: ``changed`` from ``upper`` and a whiteout for each of
    ``removed``. Returns the bytes of the regular files in it."""
    listing = b"".join(os.fsencode(rel) + b"\0" for rel in changed)
    done = subprocess.run(
        [
            "tar",
            "--create",
            f"--file={layer}",
            "--format=gnu",
            "--numeric-owner",
            "--no-recursion",
            "--null",
            f"--directory={upper}",
            "--files-from=-",
        ],
        input=listing,
        capture_output=True,
    )
    if done.returncode != 0:
        words = done.stderr.decode(errors="replace")
        raise BuildStepError(f"tar of the layer of {upper.name} failed: {words.strip()}", words)
    if removed:
        with tarfile.open(layer, "a", format=tarfile.GNU_FORMAT) as out:
            for rel in removed:
                head, name = os.path.split(rel)
                out.addfile(tarfile.TarInfo(os.path.join(head, WHITEOUT + name)))
    return sum(
        entry.st_size
        for entry in (os.lstat(upper / rel) for rel in changed)
        if stat.S_ISREG(entry.st_mode)
    )


def load_layer(layer: Path, parent: dict, tag: str, labels: dict[str, str]) -> None:
    """``docker load`` ``layer`` as image ``tag`` on top of ``parent`` (its ``docker image
    inspect``): the parent's configuration with user agent and ``labels`` added."""
    with open(layer, "rb") as handle:
        diff_id = "sha256:" + hashlib.file_digest(handle, "sha256").hexdigest()
    below = list(parent["RootFS"]["Layers"])
    settings = dict(parent.get("Config") or {})
    settings["User"] = "agent"
    settings["Labels"] = {**(settings.get("Labels") or {}), **labels}
    created = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    config = {
        "architecture": parent["Architecture"],
        "os": parent["Os"],
        "created": created,
        "config": settings,
        "rootfs": {"type": "layers", "diff_ids": [*below, diff_id]},
        "history": [{"created": created, "created_by": "agentbench level"}] * (len(below) + 1),
    }
    # The engine reads the layers it lacks (only the last); the others need no file.
    layers = [f"below-{number}/layer.tar" for number in range(len(below))]
    manifest = [{"Config": "config.json", "RepoTags": [tag], "Layers": [*layers, "layer.tar"]}]
    with tempfile.TemporaryDirectory(prefix="ab-load-", dir=layer.parent) as tmp:
        Path(tmp, "config.json").write_text(json.dumps(config))
        Path(tmp, "manifest.json").write_text(json.dumps(manifest))
        os.link(layer, Path(tmp, "layer.tar"))
        tar = subprocess.Popen(
            ["tar", "--create", "--format=gnu", f"--directory={tmp}", "."],
            stdout=subprocess.PIPE,
        )
        done = subprocess.run(
            ["docker", "load", "--quiet"], stdin=tar.stdout, capture_output=True, text=True
        )
        assert tar.stdout is not None
        tar.stdout.close()
        tar.wait()
    if done.returncode != 0 or tar.returncode != 0:
        raise BuildStepError(f"docker load {tag} failed: {done.stderr.strip()[-800:]}", done.stderr)


def build_on(
    layer: Path, removed: list[str], parent_tag: str, tag: str, labels: dict[str, str]
) -> None:
    """``docker build`` ``tag`` ``FROM parent_tag`` with an ``ADD`` of ``layer`` (written
    without whiteouts: ``ADD`` would unpack them as files) and a ``RUN rm`` of ``removed``: for
    engines whose ``docker load`` wants every layer in the archive (the containerd image
    store), at the cost of the engine unpacking the layer twice."""
    lines = [f"FROM {parent_tag}", "USER root", "ADD layer.tar /"]
    if removed:
        lines.append("RUN rm -rf " + " ".join(shlex.quote("/" + r) for r in removed))
    lines += ["USER agent", *(f"LABEL {name}={value}" for name, value in labels.items())]
    dockerfile = ("\n".join(lines) + "\n").encode()
    context = layer.with_name("context.tar")
    with tarfile.open(context, "w") as ctx:
        entry = tarfile.TarInfo("Dockerfile")
        entry.size = len(dockerfile)
        ctx.addfile(entry, io.BytesIO(dockerfile))
        ctx.add(layer, arcname="layer.tar")
    with open(context, "rb") as handle:
        done = subprocess.run(
            ["docker", "build", "-q", "--rm", "-t", tag, "-"],
            stdin=handle,
            capture_output=True,
            text=True,
            env={**os.environ, "DOCKER_BUILDKIT": "0"},
        )
    if done.returncode != 0:
        words = done.stderr.strip()[-800:]
        raise BuildStepError(f"docker build {tag} failed: {words}", done.stderr)
