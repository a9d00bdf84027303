"""Images from a registry as bubblewrap trees without a Docker engine: skopeo and umoci.

On a machine with no engine (or when ``IMAGE_TREES_FROM=registry`` asks for it), bubblewrap
still runs a task's image: ``skopeo copy docker://<ref> oci:<dir>:img`` fetches it into an OCI
layout, ``umoci raw unpack`` (``--rootless`` when not root) makes its root filesystem, and
the sandbox's mount points are added as for an engine-exported tree (``image_trees``).

The tree is the same level as an engine's export of the same image would be:
``<cache>/trees/image-<id>``, ``id`` the digest of the image's configuration (the ID an engine
gives the image once pulled), in the same budget (``SWEBENCH_CACHE_MAX_GB``), evicted and
leased the same way. Its record says it came ``via`` the registry (no engine image is the
cache's to remove, nor is it "gone from the engine") and keeps the image's Env, working
directory and user, which bubblewrap applies itself.

The pull is pinned: the tag is resolved to a manifest digest once, that digest is copied, and
the repository digest recorded is the one the registry served (``name@sha256:...``, as an
engine's RepoDigest). ``REGISTRY_MIRRORS`` applies as for the engine; registries on loopback
(which an engine trusts over plain http by default) and those named in ``REGISTRY_INSECURE``
are spoken to without TLS verification. Credentials are skopeo's (``skopeo login``, or the
``docker login`` file ``~/.docker/config.json``), never stored here. Failures raise
``registry.PullError`` with the engine path's reasons (not found, unauthorized, wrong
architecture, over the disk budget, registry unreachable after the retries).
"""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import json
import os
import platform
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from sandbox.environments import cache, eviction, registry, trees
from sandbox.environments.image_trees import (
    KIND,
    ImageTree,
    ImageTreeError,
    add_mount_points,
    level_name,
    need_room,
)
from sandbox.environments.registry import Progress, Pulled, PullError, Reference
from sandbox.environments.repos import locked

SOURCE_ENV = "IMAGE_TREES_FROM"  # auto (the engine when it answers) | engine | registry
SOURCES = ("auto", "engine", "registry")
INSECURE_ENV = "REGISTRY_INSECURE"  # hosts (host:port) spoken to without TLS verification
VIA = "registry"
COPY_TIMEOUT_SEC = 3600
INSPECT_TIMEOUT_SEC = 120
POLL_SEC = 0.5
# An image's tree takes about this many times its compressed layers (checked before the copy,
# the real size after it): the blobs are kept until the tree is unpacked.
UNPACKED_FACTOR = 3
_LISTS = (
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.index.v1+json",
)


def tree_source() -> str:
    """The ``IMAGE_TREES_FROM`` setting, checked."""
    mode = os.environ.get(SOURCE_ENV, "").strip() or "auto"
    if mode not in SOURCES:
        raise ValueError(f"{SOURCE_ENV}={mode!r}: expected one of {', '.join(SOURCES)}")
    return mode


def from_registry_wanted() -> bool:
    """Whether bubblewrap trees come from the registry (skopeo, umoci) rather than the
    engine: asked for, or ``auto`` and no engine answers."""
    mode = tree_source()
    if mode != "auto":
        return mode == "registry"
    try:
        from sandbox import docker_backend
    except ImportError:
        return True
    return docker_backend.unavailable_reason() is not None


def insecure(host: str) -> bool:
    """Whether ``host`` (``name[:port]``) is spoken to without TLS verification: loopback, as
    an engine does by default, or named in ``REGISTRY_INSECURE``."""
    named = {h.strip() for h in os.environ.get(INSECURE_ENV, "").split(",") if h.strip()}
    if host in named:
        return True
    name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    name = name.strip("[]")
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def host_architecture() -> str:
    machine = platform.machine().lower()
    return {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm"}.get(machine, machine)


def pull_tree(
    reference: str,
    *,
    progress: Callable[[Progress], None] | None = None,
    max_bytes: int | Callable[[], int | None] | None = eviction.max_bytes_from_env,
    report: Callable[[str], None] | None = None,
    mapping: dict[str, str] | None = None,
    retries: int = registry.RETRIES,
) -> Pulled:
    """The tree of image ``reference`` from its registry (or mirror), made once and cached
    (see the module docstring); a second call for the same reference asks no registry.
    ``pulled_at`` says when it was fetched, ``seconds`` 0 when nothing was. Raises PullError
    (the engine path's reasons) or ImageTreeError (the unpack)."""
    ref = Reference.parse(reference)
    source = registry.source_of(ref, mapping)
    known = _known(reference, str(source))
    if known is not None:
        cache.touch(known.name)
        found = _pulled_of(known, seconds=0.0)
        found.reference = reference
        return found
    budget = max_bytes() if callable(max_bytes) else max_bytes
    with locked(f"pull-{hashlib.sha256(reference.encode()).hexdigest()[:16]}"):
        known = _known(reference, str(source))
        if known is not None:
            return _pulled_of(known, seconds=0.0)
        return _fetch(
            reference, source, progress=progress, budget=budget, report=report, retries=retries
        )


def tree_of(image_id: str) -> ImageTree:
    """The tree of a level made by ``pull_tree`` (the caller holds its lease); ImageTreeError
    ``evicted`` when it is gone."""
    name = level_name(image_id)
    level = cache.read_level(name)
    if level is None or not level.tree.is_dir():
        raise ImageTreeError("evicted", f"the tree of {image_id} is not in the cache")
    config = level.image_config or {}
    return ImageTree(
        path=level.tree,
        image_id=image_id,
        env=tuple(config.get("Env") or ()),
        workdir=config.get("WorkingDir") or "",
        user=config.get("User") or "",
    )


def _known(reference: str, source: str) -> cache.Level | None:
    """A tree already made from ``reference`` (or the same source), still whole."""
    for level in cache.all_levels():
        ours = level.kind == KIND and level.via == VIA and level.tree.is_dir()
        if ours and (level.reference == reference or level.source == source):
            return level
    return None


def _pulled_of(level: cache.Level, *, seconds: float) -> Pulled:
    return Pulled(
        reference=level.reference,
        source=level.source,
        repo_digest=level.repo_digest,
        image_id=level.image,
        pulled_at=level.pulled_at,
        size=level.tree_bytes or 0,
        owned=False,
        architecture=str((level.image_config or {}).get("architecture", "")),
        seconds=seconds,
    )


def _skopeo(args: list[str], source: Reference, *, timeout: float) -> bytes:
    """One skopeo call on ``source``'s registry; PullError naming the reason on failure."""
    flag = ["--tls-verify=false"] if insecure(source.registry) else []
    try:
        done = subprocess.run(
            ["skopeo", *args[:1], *flag, *args[1:]], capture_output=True, timeout=timeout
        )
    except FileNotFoundError as exc:
        raise PullError(
            registry.FAILED, "skopeo is not installed (apt-get install skopeo)"
        ) from exc
    except subprocess.TimeoutExpired as exc:
        raise PullError(registry.UNREACHABLE, f"skopeo {args[0]} of {source}: timed out") from exc
    if done.returncode != 0:
        words = _words(done.stderr)
        raise PullError(registry.classify(words), f"pull of {source} failed: {words}")
    return done.stdout


def _words(stderr: bytes) -> str:
    text = stderr.decode(errors="replace").strip()
    last = text.splitlines()[-1] if text else "no output"
    if 'msg="' in last:  # logrus: level=fatal msg="..."
        last = last.split('msg="', 1)[1].rstrip('"').replace('\\"', '"')
    return last[:800]


def _resolve(source: Reference) -> tuple[str, str, dict, bytes, int]:
    """(the repository digest served, the platform manifest's digest, that manifest, the raw
    configuration, the compressed bytes of its layers) of ``source`` for this machine."""
    top = _skopeo(["inspect", "--raw", f"docker://{source}"], source, timeout=INSPECT_TIMEOUT_SEC)
    served = "sha256:" + hashlib.sha256(top).hexdigest()
    manifest = json.loads(top)
    pinned = served
    if manifest.get("mediaType") in _LISTS or "manifests" in manifest:
        arch = host_architecture()
        match = [
            m
            for m in manifest.get("manifests") or []
            if (m.get("platform") or {}).get("architecture") == arch
            and (m.get("platform") or {}).get("os", "linux") == "linux"
        ]
        if not match:
            found = sorted(
                {(m.get("platform") or {}).get("architecture", "?") for m in manifest["manifests"]}
            )
            raise PullError(
                registry.WRONG_ARCHITECTURE,
                f"{source} lists images for {', '.join(found)}; this machine runs {arch}",
            )
        pinned = match[0]["digest"]
        raw = _skopeo(
            ["inspect", "--raw", f"docker://{source.name}@{pinned}"],
            source,
            timeout=INSPECT_TIMEOUT_SEC,
        )
        manifest = json.loads(raw)
    config = _skopeo(
        ["inspect", "--config", "--raw", f"docker://{source.name}@{pinned}"],
        source,
        timeout=INSPECT_TIMEOUT_SEC,
    )
    compressed = sum(int(layer.get("size") or 0) for layer in manifest.get("layers") or [])
    return served, pinned, manifest, config, compressed


def _fetch(
    reference: str,
    source: Reference,
    *,
    progress: Callable[[Progress], None] | None,
    budget: int | None,
    report: Callable[[str], None] | None,
    retries: int,
) -> Pulled:
    started = time.monotonic()
    last = ""
    for attempt in range(1, retries + 1):
        state = Progress(str(source), attempt=attempt)
        try:
            return _fetch_once(reference, source, state, progress, budget, report, started)
        except PullError as exc:
            if exc.reason not in registry.TRANSIENT or attempt == retries:
                raise
            last = str(exc)
        if progress is not None:
            state.status = f"retrying after: {last.splitlines()[0][:200]}"
            progress(state)
        time.sleep(registry.RETRY_WAIT_SEC * attempt)
    raise PullError(registry.UNREACHABLE, f"pull of {source} failed {retries} times: {last}")


def _fetch_once(
    reference: str,
    source: Reference,
    state: Progress,
    progress: Callable[[Progress], None] | None,
    budget: int | None,
    report: Callable[[str], None] | None,
    started: float,
) -> Pulled:
    served, pinned, manifest, raw_config, compressed = _resolve(source)
    config = json.loads(raw_config)
    image_id = "sha256:" + hashlib.sha256(raw_config).hexdigest()
    arch = str(config.get("architecture") or "")
    if arch and arch != host_architecture():
        raise PullError(
            registry.WRONG_ARCHITECTURE,
            f"{reference} is an image for {config.get('os', 'linux')}/{arch}; this machine "
            f"runs {host_architecture()}",
        )
    try:
        need_room(
            compressed * UNPACKED_FACTOR,
            max_bytes=budget,
            what=f"the tree of {source}",
            report=report,
        )
    except ImageTreeError as exc:
        raise PullError(registry.OVER_BUDGET, str(exc).removeprefix(f"[{exc.reason}] ")) from exc
    layers = [str(layer.get("digest", "")) for layer in manifest.get("layers") or []]
    state.layers, state.bytes_total = len(layers), compressed
    name = level_name(image_id)
    path = cache.trees_dir() / name
    with locked(name):
        if not path.is_dir():
            with trees.staging(path) as work:
                oci = Path(tempfile.mkdtemp(prefix=f".{name}.oci-", dir=path.parent))
                try:
                    _copy(source, pinned, oci, layers, state, progress)
                    _unpack(oci, work)
                finally:
                    shutil.rmtree(oci, ignore_errors=True)
                add_mount_points(work)
        level = cache.read_level(name) or cache.Level(
            name, KIND, image_id.removeprefix("sha256:"), built_at=time.time()
        )
        if not level.source:  # an engine's pull of the same image keeps its own record
            level.via = VIA
            level.reference, level.source = reference, str(source)
            level.repo_digest = f"{source.name}@{served}"
            level.pulled_at = time.time()
        level.image = image_id
        level.built_at = level.built_at or time.time()
        level.image_config = {
            "Env": list((config.get("config") or {}).get("Env") or []),
            "WorkingDir": (config.get("config") or {}).get("WorkingDir") or "",
            "User": (config.get("config") or {}).get("User") or "",
            "architecture": arch,
        }
        level.seconds = round(time.monotonic() - started, 1)
        level.tree_bytes = cache.own_tree_bytes(path, [])
        cache.write_level(level)
    # Room for what it really took, never by evicting the tree just made (as image_trees).
    with cache.lease(name):
        if budget is not None:
            eviction.make_room(max_bytes=budget, report=report)
    pulled = _pulled_of(level, seconds=level.seconds)
    pulled.owned, pulled.layers = True, len(layers)
    pulled.reference = reference
    return pulled


def _copy(
    source: Reference,
    pinned: str,
    oci: Path,
    layers: list[str],
    state: Progress,
    progress: Callable[[Progress], None] | None,
) -> None:
    """``skopeo copy`` of the pinned manifest into the OCI layout ``oci``, reporting progress
    from the blobs written so far (skopeo says nothing of bytes when not on a terminal)."""
    flag = ["--src-tls-verify=false"] if insecure(source.registry) else []
    command = ["skopeo", "copy", "--quiet", *flag,
               f"docker://{source.name}@{pinned}", f"oci:{oci}:img"]  # fmt: skip
    begun = time.monotonic()
    with tempfile.TemporaryFile() as errors:
        try:
            copy = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=errors)
        except FileNotFoundError as exc:
            raise PullError(registry.FAILED, "skopeo is not installed") from exc
        try:
            while True:
                try:
                    copy.wait(POLL_SEC)
                    break
                except subprocess.TimeoutExpired:
                    pass
                if time.monotonic() - begun > COPY_TIMEOUT_SEC:
                    raise PullError(registry.UNREACHABLE, f"copy of {source} timed out")
                _measure(oci, layers, state, begun)
                if progress is not None:
                    progress(state)
        finally:
            if copy.poll() is None:
                copy.kill()
                copy.wait()
        errors.seek(0)
        stderr = errors.read()
    if copy.returncode != 0:
        words = _words(stderr)
        raise PullError(registry.classify(words), f"pull of {source} failed: {words}")
    state.layers_done, state.bytes_done, state.eta_sec = len(layers), state.bytes_total, 0.0
    state.status = "Pull complete"
    if progress is not None:
        progress(state)


def _measure(oci: Path, layers: list[str], state: Progress, begun: float) -> None:
    written = 0
    for folder, _, files in os.walk(oci):
        for file in files:
            with contextlib.suppress(OSError):
                written += os.lstat(os.path.join(folder, file)).st_size
    blobs = oci / "blobs" / "sha256"
    state.layers_done = sum(1 for d in layers if (blobs / d.removeprefix("sha256:")).exists())
    state.bytes_done = min(written, state.bytes_total)
    state.status = "Downloading"
    elapsed = time.monotonic() - begun
    rate = state.bytes_done / elapsed if elapsed > 0 else 0
    left = state.bytes_total - state.bytes_done
    state.eta_sec = left / rate if rate > 0 and state.bytes_total else None


def _unpack(oci: Path, work: Path) -> None:
    """``umoci raw unpack`` of the layout's image into ``work`` (owners kept when root)."""
    work.rmdir()  # umoci makes the folder itself
    rootless = ["--rootless"] if os.geteuid() != 0 else []
    try:
        done = subprocess.run(
            ["umoci", "raw", "unpack", *rootless, "--image", f"{oci}:img", str(work)],
            capture_output=True,
            text=True,
            timeout=COPY_TIMEOUT_SEC,
        )
    except FileNotFoundError as exc:
        work.mkdir()
        raise ImageTreeError("unpack failed", "umoci is not installed") from exc
    if done.returncode != 0:
        work.mkdir(exist_ok=True)
        full = "no space left on device" in done.stderr.lower()
        raise ImageTreeError(
            "disk full" if full else "unpack failed",
            f"umoci unpack of {oci.name}: {done.stderr.strip()[-500:]}",
        )
