"""An upper level's image holds exactly its tree: the files changed, added and removed over
the tree below (whiteouts), links, modes and long names, in a layer of just the changes on
the real image below, with the image below's settings and the level's key; loaded as one
layer, or built (the containerd image store's way).

Real Docker engine; the trees are small made-up ones (no Debian needed to compare files).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import tarfile
import uuid
from pathlib import Path

import pytest

from sandbox.environments import docker_images, image_layers, trees

pytestmark = pytest.mark.docker

LONG = "deep/" * 30 + "a-file-with-a-name-longer-than-a-ustar-header-holds.txt"
# Docker makes these in every container it exports ...
ENGINE_MADE = {
    ".dockerenv",
    "dev",
    "proc",
    "sys",
    "etc/hostname",
    "etc/hosts",
    "etc/resolv.conf",
    "etc/mtab",
    "testbed",
}
# (and the working folder, /testbed)


SHELL_FILES = [
    "/bin/sh",
    "/bin/rm",
    "/lib/x86_64-linux-gnu/libc.so.6",
    "/lib64/ld-linux-x86-64.so.2",
]


def make_lower(root: Path) -> None:
    for rel, text in {
        "etc/passwd": "root:x:0:0::/root:/bin/sh\n",
        "keep/same.txt": "untouched\n",
        "keep/edited.txt": "before\n",
        "keep/mode.sh": "echo hi\n",
        "gone/file.txt": "removed with its folder\n",
        "gone/deeper/more.txt": "also removed\n",
        "lonely.txt": "removed alone\n",
        "becomes-dir": "a file that becomes a folder\n",
    }.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (root / "link").symlink_to("keep/same.txt")
    (root / "was-link").symlink_to("keep")  # a folder in the upper tree
    for sub in ("dev", "proc", "sys"):
        (root / sub).mkdir()
    # A shell and rm for the `RUN rm` of a built image (the host's, with the C library).
    for program in SHELL_FILES:
        (root / program.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(program, root / program.lstrip("/"))


def change(upper: Path) -> None:
    # A hard-link copy shares inodes: replace files rather than write into them.
    edited = upper / "keep/edited.txt"
    edited.unlink()
    edited.write_text("after, and longer\n")
    mode = upper / "keep/mode.sh"
    shutil.copy2(mode, mode.with_suffix(".tmp"))
    mode.unlink()
    mode.with_suffix(".tmp").rename(mode)
    mode.chmod(0o755)
    shutil.rmtree(upper / "gone")
    (upper / "lonely.txt").unlink()
    (upper / "becomes-dir").unlink()
    (upper / "becomes-dir").mkdir()
    (upper / "becomes-dir/inside.txt").write_text("now a folder\n")
    (upper / "link").unlink()
    (upper / "link").symlink_to("keep/edited.txt")
    # Not compared with what the lower tree's link leads to (lower/keep/same.txt: the same inode).
    (upper / "was-link").unlink()
    (upper / "was-link").mkdir()
    os.link(upper / "keep/same.txt", upper / "was-link/same.txt")
    (upper / LONG).parent.mkdir(parents=True)
    (upper / LONG).write_text("long name\n")
    (upper / "new/pair-a.txt").parent.mkdir()
    (upper / "new/pair-a.txt").write_text("hard-linked pair\n")
    os.link(upper / "new/pair-a.txt", upper / "new/pair-b.txt")


def exported(tag: str) -> dict[str, tuple]:
    """path -> (type, mode, content or link target) of a container made from ``tag``."""
    made = subprocess.run(["docker", "create", tag], capture_output=True, text=True, check=True)
    container = made.stdout.strip()
    try:
        data = subprocess.run(["docker", "export", container], capture_output=True, check=True)
    finally:
        subprocess.run(["docker", "rm", "-f", container], capture_output=True)
    files = {}
    with tarfile.open(fileobj=io.BytesIO(data.stdout)) as archive:
        for member in archive.getmembers():
            rel = member.name.removeprefix("./").rstrip("/")
            if not rel or any(rel == e or rel.startswith(e + "/") for e in ENGINE_MADE):
                continue
            if member.isdir():
                files[rel] = ("dir", member.mode & 0o7777, None)
            elif member.issym():
                files[rel] = ("link", member.mode & 0o7777, member.linkname)
            elif member.islnk():  # the same content as its target
                files[rel] = files[member.linkname.removeprefix("./")]
            else:
                content = archive.extractfile(member).read()
                files[rel] = ("file", member.mode & 0o7777, content)
    return files


def on_disk(root: Path) -> dict[str, tuple]:
    files = {}
    for folder, dirs, names in os.walk(root):
        for name in dirs + names:
            path = Path(folder, name)
            rel = str(path.relative_to(root))
            if any(rel == e or rel.startswith(e + "/") for e in ENGINE_MADE):
                continue
            mode = path.lstat().st_mode & 0o7777
            if path.is_symlink():
                files[rel] = ("link", mode, os.readlink(path))
            elif path.is_dir():
                files[rel] = ("dir", mode, None)
            else:
                files[rel] = ("file", mode, path.read_bytes())
    return files


def two_trees(tmp_path: Path) -> tuple[Path, Path]:
    """A lower tree and a hard-link copy of it (the upper tree), as a level build makes."""
    lower, upper = tmp_path / "lower", tmp_path / "upper"
    lower.mkdir()
    make_lower(lower)
    upper.mkdir()
    trees.hardlink_copy(lower, upper)
    return lower, upper


@pytest.mark.parametrize("way", ["load", "build"])
def test_an_upper_image_is_its_tree_in_a_layer_of_the_changes(
    way: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``load``: one layer, docker load-ed (the classic image store); ``build``: docker build
    with ADD and RUN rm, as on the containerd image store, whose load wants every layer."""
    monkeypatch.setattr(docker_images, "loads_a_layer_alone", lambda: way == "load")
    lower, upper = two_trees(tmp_path)
    change(upper)
    name = f"agentbench/test-layers-{uuid.uuid4().hex[:8]}"
    base, top = f"{name}:base", f"{name}:top"
    try:
        docker_images.import_base(lower, base, "basekey", venv_bin="/opt/venv/bin")
        added = docker_images.build_layer(lower, upper, base, top, "topkey")

        assert exported(top) == on_disk(upper)
        assert exported(base) == on_disk(lower)  # the image below is left as it was

        changed, removed = image_layers.tree_diff(lower, upper)
        assert set(removed) == {"gone", "lonely.txt"}
        assert "keep/same.txt" not in changed and "etc/passwd" not in changed
        assert {"keep/edited.txt", "keep/mode.sh", "link", LONG, "becomes-dir"} <= set(changed)
        # Only the changed files' bytes were added: edited, mode.sh, inside, long, the pair,
        # was-link/same.txt.
        sizes = [18, 8, 13, 10, 17, 10]
        assert added == sum(sizes) + 17

        (below,), (image,) = (
            json.loads(
                subprocess.run(
                    ["docker", "image", "inspect", ref], capture_output=True, text=True, check=True
                ).stdout
            )
            for ref in (base, top)
        )
        layers, lower_layers = image["RootFS"]["Layers"], below["RootFS"]["Layers"]
        assert layers[: len(lower_layers)] == lower_layers
        if way == "load":
            assert len(layers) == len(lower_layers) + 1
        else:  # the engine's own: ADD, RUN rm and what its steps leave
            assert len(layers) > len(lower_layers)
        assert image["Config"]["User"] == "agent"
        assert image["Config"]["Labels"][docker_images.LABEL] == "topkey"
        assert docker_images.image_key(top) == "topkey"
        for setting in ("Env", "WorkingDir", "Cmd"):
            assert image["Config"][setting] == below["Config"][setting]
    finally:
        subprocess.run(["docker", "image", "rm", top, base], capture_output=True)


def test_a_failed_load_names_the_image_and_the_engines_words(tmp_path: Path) -> None:
    lower, upper = two_trees(tmp_path)
    with pytest.raises(trees.BuildStepError) as caught:
        docker_images.build_layer(lower, upper, "agentbench/no-such-image:x", "agentbench/t:y", "k")
    assert "agentbench/no-such-image:x" in str(caught.value)
