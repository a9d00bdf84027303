"""Where the images built from Dockerfiles (``dockerfile.py``) are kept and how they are named,
apart from the building: eviction and the inventory read and remove them without importing the
builder (which calls eviction itself).

An image is tagged ``agentbench/env-dockerfile:<key[:20]>`` and labelled with its whole key;
it belongs to the cache root that holds ``<root>/dockerfiles/<key>/`` (another root's image is
left to that root's budget). Its use lease is ``dockerfile-<key>`` (``cache.lease``): an
attempt holds it while it runs from the image, and its lease file's mtime is its last use.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from sandbox.environments import cache, docker_images
from sandbox.environments.repos import cache_root

IMAGE_REPOSITORY = "agentbench/env-dockerfile"
LABEL = "agentbench.dockerfile.key"
RECORD_NAME = "build.json"
# Folders under dockerfiles/ that are no build's: the records per context and the FROM-image
# contexts of Harbor tasks (harbor_image.py).
NOT_KEYS = ("by-context", "from-image")


def folder_for(key: str) -> Path:
    return cache_root() / "dockerfiles" / key


def lease_name(key: str) -> str:
    """The cache lease an attempt running from this image holds (eviction leaves it alone)."""
    return f"dockerfile-{key}"


def tag_for(key: str) -> str:
    return f"{IMAGE_REPOSITORY}:{key[:20]}"


@dataclass(frozen=True)
class StoredImage:
    """A Dockerfile image of this cache root on the engine."""

    key: str
    tag: str
    bytes: int
    last_used: float

    @property
    def name(self) -> str:
        return lease_name(self.key)


def label_of(tag: str) -> str:
    """The context key ``tag`` was built from ("" when there is no such image)."""
    template = f'{{{{ index .Config.Labels "{LABEL}" }}}}'
    done = subprocess.run(
        ["docker", "image", "inspect", "--format", template, tag],
        capture_output=True,
        text=True,
    )
    return done.stdout.strip() if done.returncode == 0 else ""


def stored_images() -> list[StoredImage]:
    """The Dockerfile images this cache root built that the engine holds, with their bytes
    and their last use (the lease file's mtime, else the build's folder's)."""
    done = subprocess.run(
        [
            "docker",
            "image",
            "ls",
            "--filter",
            f"label={LABEL}",
            "--format",
            "{{ .Repository }}:{{ .Tag }}",
        ],
        capture_output=True,
        text=True,
    )
    found = []
    for tag in sorted(set(done.stdout.split())):
        key = label_of(tag)
        if not key or not folder_for(key).is_dir():
            continue  # another cache root's image: its own budget keeps it
        use = cache.use_file(lease_name(key))
        try:
            last = use.stat().st_mtime
        except OSError:
            last = folder_for(key).stat().st_mtime
        found.append(StoredImage(key, tag, docker_images.image_size(tag) or 0, last))
    return found


def build_folders() -> list[Path]:
    """Every build folder (``dockerfiles/<key>``) of this cache root."""
    root = cache_root() / "dockerfiles"
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and p.name not in NOT_KEYS)


def remove(image: StoredImage) -> str:
    """Remove the image and its lease file (the caller holds its exclusive lease); the build
    folder stays (its log). Returns the engine's complaint ("" when it went)."""
    problem = docker_images.remove_image(image.tag)
    if not problem:
        cache.use_file(image.name).unlink(missing_ok=True)
    return problem
