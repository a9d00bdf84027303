"""Docker images of the offline SWE-bench levels, made from the rootfs trees without a registry.

The base level is ``docker import``-ed from its tree. An upper level is the image below plus
one layer of what its tree changed over the tree below (``image_layers``). So the images are
layered like the trees (an instance image stores its /testbed and venv changes, not a new
Debian) and hold exactly the files the bubblewrap backend runs.
"""

from __future__ import annotations

import functools
import json
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from sandbox.environments import image_layers
from sandbox.environments.trees import PATH_ENV, BuildStepError

LABEL = "agentbench.swebench.key"


def image_key(tag: str) -> str | None:
    """The build key an image was labelled with, or None when there is no such image."""
    done = subprocess.run(
        [
            "docker",
            "image",
            "inspect",
            "--format",
            f'{{{{ index .Config.Labels "{LABEL}" }}}}',
            tag,
        ],
        capture_output=True,
        text=True,
    )
    return done.stdout.strip() if done.returncode == 0 else None


def engine_available() -> bool:
    return subprocess.run(["docker", "info"], capture_output=True).returncode == 0


@dataclass(frozen=True)
class ImageInfo:
    """A level image on the engine: its id, tags, ``Size`` (bytes of all its layers) and the
    build key it was labelled with."""

    id: str
    tags: tuple[str, ...]
    size: int
    key: str


def image_size(tag: str) -> int | None:
    """The bytes of all of ``tag``'s layers (``docker image inspect``'s Size), or None."""
    done = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{ .Size }}", tag],
        capture_output=True,
        text=True,
    )
    return int(done.stdout.strip()) if done.returncode == 0 and done.stdout.strip() else None


def level_images() -> list[ImageInfo] | None:
    """Every image labelled with a build key (any cache root's), or None when no engine
    answers."""
    listed = subprocess.run(
        ["docker", "images", "--quiet", "--no-trunc", "--filter", f"label={LABEL}"],
        capture_output=True,
        text=True,
    )
    if listed.returncode != 0:
        return None
    ids = sorted(set(listed.stdout.split()))
    if not ids:
        return []
    done = subprocess.run(["docker", "image", "inspect", *ids], capture_output=True, text=True)
    if done.returncode != 0:  # one was removed meanwhile: ask again one by one
        found = [level_image(i) for i in ids]
        return [f for f in found if f is not None]
    return [_info(item) for item in json.loads(done.stdout)]


def level_image(ref: str) -> ImageInfo | None:
    done = subprocess.run(["docker", "image", "inspect", ref], capture_output=True, text=True)
    if done.returncode != 0:
        return None
    return _info(json.loads(done.stdout)[0])


def _info(item: dict) -> ImageInfo:
    labels = (item.get("Config") or {}).get("Labels") or {}
    return ImageInfo(
        id=item["Id"],
        tags=tuple(item.get("RepoTags") or ()),
        size=int(item.get("Size") or 0),
        key=labels.get(LABEL, ""),
    )


def remove_image(ref: str, *, force: bool = False) -> str:
    """``docker image rm ref``: "" when done (or already gone), else the engine's words.
    ``force``: by ID with all its names (the engine still keeps one a container runs)."""
    args = ["docker", "image", "rm", *(["--force"] if force else []), ref]
    done = subprocess.run(args, capture_output=True, text=True)
    if done.returncode == 0 or "No such image" in done.stderr:
        return ""
    words = done.stderr.strip()
    return words.splitlines()[-1] if words else f"exit {done.returncode}"


def import_base(tree: Path, tag: str, key: str, *, venv_bin: str) -> None:
    """``docker import`` the base tree as ``tag`` (user agent, PATH with the venv first)."""
    # tar's complaints go to a file: a pipe nobody reads while docker reads the tar could fill.
    complaints = tempfile.TemporaryFile()  # noqa: SIM115 (closed below)
    tar = subprocess.Popen(
        ["tar", "--numeric-owner", "-C", str(tree), "-c", "."],
        stdout=subprocess.PIPE,
        stderr=complaints,
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
    complaints.seek(0)
    tar_errors = complaints.read().decode(errors="replace")
    complaints.close()
    if done.returncode != 0 or not _tar_ok(tar.returncode, tar_errors):
        words = done.stderr.strip() or tar_errors.strip()
        raise BuildStepError(f"docker import {tag} failed: {words}", done.stderr + tar_errors)


def _tar_ok(code: int, errors: str) -> bool:
    """tar exits 1 for "file changed as we read it", which a hard-link copy of the tree made
    meanwhile (another build's level above) causes by changing link counts only: the files
    read are whole. Any other complaint is a failure."""
    if code == 0:
        return True
    lines = [line for line in errors.splitlines() if line.strip()]
    return code == 1 and all(line.endswith("file changed as we read it") for line in lines)


def build_layer(lower: Path, upper: Path, parent_tag: str, tag: str, key: str) -> int:
    """Make image ``tag``: ``parent_tag`` and one layer of what ``upper`` changed over
    ``lower`` (``image_layers``). Returns the bytes added."""
    parent = subprocess.run(
        ["docker", "image", "inspect", parent_tag], capture_output=True, text=True
    )
    if parent.returncode != 0:
        raise BuildStepError(
            f"no image {parent_tag} below {tag}: {parent.stderr.strip()}", parent.stderr
        )
    changed, removed = image_layers.tree_diff(lower, upper)
    # Beside the tree (the same file system; /tmp may be small), named like a build's work
    # folder so ``ab swebench prune`` removes one a killed build left.
    with tempfile.TemporaryDirectory(prefix=f".{upper.name}.layer-", dir=upper.parent) as tmp:
        layer = Path(tmp) / "layer.tar"
        load = loads_a_layer_alone()  # else removals are a RUN rm, not whiteouts
        added = image_layers.write_layer(upper, changed, removed if load else [], layer)
        if load:
            image_layers.load_layer(layer, json.loads(parent.stdout)[0], tag, {LABEL: key})
        else:
            image_layers.build_on(layer, removed, parent_tag, tag, {LABEL: key})
    return added


@functools.cache
def loads_a_layer_alone() -> bool:
    """Whether the engine's ``docker load`` takes an image whose lower layers it already has
    without their files: the classic image store does; the containerd image store (the
    ``io.containerd.snapshotter`` driver type) wants every layer in the archive."""
    done = subprocess.run(
        ["docker", "info", "--format", "{{json .DriverStatus}}"], capture_output=True, text=True
    )
    return "io.containerd.snapshotter" not in done.stdout
