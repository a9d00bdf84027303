"""Docker images of the offline SWE-bench levels, made from the rootfs trees without a registry.

The base level is ``docker import``-ed from its tree. An upper level is ``docker build``-t
``FROM`` the image below with one ``ADD`` of a tar of what its tree changed (files whose inode
differs from the lower tree's and whose size, mtime or mode differs too; the hard-link copy
shares every untouched file), plus a ``RUN rm`` of what it removed. So the images are layered
like the trees (an instance image stores its /testbed and venv changes, not a new Debian) and
hold exactly the files the bubblewrap backend runs.
"""

from __future__ import annotations

import io
import os
import shlex
import stat
import subprocess
import tarfile
import tempfile
from pathlib import Path

from tasks_app.swebench.trees import PATH_ENV, BuildStepError

LABEL = "agentbench.swebench.key"


def image_key(tag: str) -> str | None:
    """The build key an image was labelled with, or None when there is no such image."""
    done = subprocess.run(
        ["docker", "image", "inspect", "--format", f'{{{{ index .Config.Labels "{LABEL}" }}}}',
         tag],
        capture_output=True, text=True,
    )  # fmt: skip
    return done.stdout.strip() if done.returncode == 0 else None


def engine_available() -> bool:
    return subprocess.run(["docker", "info"], capture_output=True).returncode == 0


def import_base(tree: Path, tag: str, key: str, *, venv_bin: str) -> None:
    """``docker import`` the base tree as ``tag`` (user agent, PATH with the venv first)."""
    tar = subprocess.Popen(
        ["tar", "--numeric-owner", "-C", str(tree), "-c", "."], stdout=subprocess.PIPE
    )
    changes = [
        "USER agent",
        "WORKDIR /testbed",
        f"ENV PATH={venv_bin}:{PATH_ENV}",
        "ENV LANG=C.UTF-8",
        f"LABEL {LABEL}={key}",
        'CMD ["bash"]',
    ]
    args = ["docker", "import"]
    for change in changes:
        args += ["--change", change]
    done = subprocess.run([*args, "-", tag], stdin=tar.stdout, capture_output=True, text=True)
    tar.wait()
    if done.returncode != 0 or tar.returncode != 0:
        raise BuildStepError(f"docker import {tag} failed: {done.stderr.strip()}", done.stderr)


def build_layer(lower: Path, upper: Path, parent_tag: str, tag: str, key: str) -> int:
    """Build ``tag`` FROM ``parent_tag`` with what ``upper`` changed over ``lower``. Returns
    the bytes added."""
    changed, removed = tree_diff(lower, upper)
    with tempfile.TemporaryDirectory(prefix="ab-layer-") as tmp:
        context = Path(tmp) / "context.tar"
        added = 0
        with tarfile.open(context, "w") as ctx:
            layer = Path(tmp) / "layer.tar"
            with tarfile.open(layer, "w", format=tarfile.PAX_FORMAT) as out:
                for rel in changed:
                    info = out.gettarinfo(str(upper / rel), arcname=rel)
                    if info.isreg():
                        added += info.size
                        with open(upper / rel, "rb") as handle:
                            out.addfile(info, handle)
                    else:
                        out.addfile(info)
            lines = [f"FROM {parent_tag}", "USER root"]
            if changed:
                lines.append("ADD layer.tar /")
            if removed:
                lines.append("RUN rm -rf " + " ".join(shlex.quote("/" + r) for r in removed))
            lines += ["USER agent", f"LABEL {LABEL}={key}"]
            dockerfile = ("\n".join(lines) + "\n").encode()
            entry = tarfile.TarInfo("Dockerfile")
            entry.size = len(dockerfile)
            ctx.addfile(entry, io.BytesIO(dockerfile))
            ctx.add(layer, arcname="layer.tar")
        with open(context, "rb") as handle:
            done = subprocess.run(
                ["docker", "build", "-q", "--rm", "-t", tag, "-"],
                stdin=handle, capture_output=True, text=True,
                env={**os.environ, "DOCKER_BUILDKIT": "0"},
            )  # fmt: skip
    if done.returncode != 0:
        raise BuildStepError(
            f"docker build {tag} failed: {done.stderr.strip()[-800:]}", done.stderr
        )
    return added


def tree_diff(lower: Path, upper: Path) -> tuple[list[str], list[str]]:
    """(paths new or changed in ``upper``, paths gone from it), relative, parents first."""
    changed: list[str] = []
    removed: list[str] = []
    for root, dirs, files in os.walk(upper):
        rel_root = os.path.relpath(root, upper)
        for name in sorted(dirs) + sorted(files):
            rel = os.path.normpath(os.path.join(rel_root, name))
            new = os.lstat(upper / rel)
            try:
                old = os.lstat(lower / rel)
            except FileNotFoundError:
                changed.append(rel)
                continue
            if _differs(old, new, lower / rel, upper / rel):
                changed.append(rel)
        dirs.sort()
    for root, dirs, files in os.walk(lower):
        rel_root = os.path.relpath(root, lower)
        for name in dirs + files:
            rel = os.path.normpath(os.path.join(rel_root, name))
            if not os.path.lexists(upper / rel):
                removed.append(rel)
        # A removed folder goes as a whole.
        dirs[:] = [d for d in dirs if os.path.lexists(upper / rel_root / d)]
    return changed, removed


def _differs(old: os.stat_result, new: os.stat_result, old_path: Path, new_path: Path) -> bool:
    if old.st_ino == new.st_ino and old.st_dev == new.st_dev:
        return False
    if stat.S_IFMT(old.st_mode) != stat.S_IFMT(new.st_mode):
        return True
    if (old.st_mode, old.st_uid, old.st_gid) != (new.st_mode, new.st_uid, new.st_gid):
        return True
    if stat.S_ISDIR(new.st_mode):
        return False  # its entries are compared one by one
    if stat.S_ISLNK(new.st_mode):
        return os.readlink(old_path) != os.readlink(new_path)
    return (old.st_size, old.st_mtime_ns) != (new.st_size, new.st_mtime_ns)
