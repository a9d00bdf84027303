"""SWE-bench instances on their official images (``ab swebench build --source image|auto``).

The name is the official harness's (``swebench.harness.test_spec.TestSpec.instance_image_key``,
called on the instance's fields, so the scheme is the package's own):
``<namespace>/sweb.eval.<arch>.<instance id, lower case>:<tag>`` with every ``__`` written
``_1776_``; namespace ``swebench`` and tag ``latest`` by default, as there. The image is pulled
like any task image (``pulled``: ``REGISTRY_MIRRORS``, retries, the disk budget, named
failures) and the choice is kept per instance in ``<cache>/official/<id>.json`` (the
image's ID, the name, the repository digest, where from and when); an offline build of the
instance removes it again (the last build says what the instance runs on). The pipeline reads
it (``official_record``): on Docker the image runs by its ID, on bubblewrap its exported tree
(``image_trees``) with the same mounts as an offline-built tree.

The official images keep the environment in a conda env ``testbed`` under /opt/miniconda3
and the repository at /testbed: the official eval script (``tasks_app.swebench.eval_script``)
activates it as the harness does.
"""

from __future__ import annotations

import json
import os
import platform
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from types import SimpleNamespace

from sandbox.environments import docker_images
from sandbox.environments.registry import Pulled
from sandbox.environments.repos import cache_root

DEFAULT_NAMESPACE = "swebench"
DEFAULT_TAG = "latest"


def official_arch() -> str:
    """The harness's architecture word for this machine (``x86_64`` or ``arm64``)."""
    machine = platform.machine().lower()
    return "arm64" if machine in ("aarch64", "arm64") else "x86_64"


def official_image_name(
    instance_id: str,
    *,
    namespace: str = DEFAULT_NAMESPACE,
    tag: str = DEFAULT_TAG,
    arch: str | None = None,
) -> str:
    """The official image of ``instance_id`` (the harness's own ``instance_image_key``)."""
    from swebench.harness.test_spec.test_spec import TestSpec

    spec = SimpleNamespace(
        arch=arch or official_arch(),
        instance_id=instance_id,
        instance_image_tag=tag,
        namespace=namespace,
        is_remote_image=True,
    )
    return str(TestSpec.instance_image_key.fget(spec))  # type: ignore[attr-defined]


@dataclass
class OfficialImage:
    """An instance that runs on its official image: which, from where, when."""

    instance_id: str
    name: str
    image_id: str
    repo_digest: str
    source: str
    pulled_at: float
    recorded_at: float = 0.0


def record_path(instance_id: str) -> Path:
    # Not under instances/: eviction and prune read every file there as an offline build.
    return cache_root() / "official" / f"{instance_id}.json"


def record_official(instance_id: str, name: str, pulled: Pulled) -> OfficialImage:
    """Keep that ``instance_id`` runs on image ``name`` as ``pulled`` (atomically)."""
    found = OfficialImage(
        instance_id=instance_id,
        name=name,
        image_id=pulled.image_id,
        repo_digest=pulled.repo_digest,
        source=pulled.source,
        pulled_at=pulled.pulled_at,
        recorded_at=time.time(),
    )
    path = record_path(instance_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{time.monotonic_ns()}")
    tmp.write_text(json.dumps(asdict(found), indent=2))
    tmp.rename(path)
    return found


def official_record(instance_id: str) -> OfficialImage | None:
    """The official image ``instance_id`` runs on, when one was chosen and is still on the
    engine (else None: the offline build, or nothing)."""
    try:
        data = json.loads(record_path(instance_id).read_text())
    except (OSError, ValueError):
        return None
    known = {f.name for f in fields(OfficialImage)}
    found = OfficialImage(**{k: v for k, v in data.items() if k in known})
    if docker_images.image_size(found.image_id) is None:
        return None
    return found


def drop_official(instance_id: str) -> None:
    """The instance was built offline: it runs on that build from now on."""
    record_path(instance_id).unlink(missing_ok=True)
