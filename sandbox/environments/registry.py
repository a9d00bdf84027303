"""Images from a registry: references, the mirror setting, and pulls that end with a named
reason.

A task names an image by tag or digest (``python:3.11``, ``ghcr.io/o/r@sha256:...``). When it
is not on the engine it is pulled through the engine (so credentials are the engine's own
``docker login``, never stored here), from the registry the ``REGISTRY_MIRRORS`` setting maps
its registry to (``docker.io=127.0.0.1:5000,ghcr.io=mirror.example:5000``), with progress
(layers, bytes, an estimate), retries on transient errors, and the disk budget of the
environments cache. A pull that fails raises PullError whose ``reason`` is one of
``REASONS``: the CLI, the task page and the attempt's error say it in those words.

What is kept (``Pulled``): the reference asked for, where it came from, the repository digest
the registry served, the image ID, when. The image is run by its ID, so a digest pulled through
a mirror runs whatever name the mirror gave it.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

DEFAULT_REGISTRY = "docker.io"
MIRRORS_ENV = "REGISTRY_MIRRORS"
RETRIES = 3
RETRY_WAIT_SEC = 2.0

NOT_FOUND = "not found"
UNAUTHORIZED = "unauthorized"
WRONG_ARCHITECTURE = "wrong architecture"
OVER_BUDGET = "over the disk budget"
UNREACHABLE = "registry unreachable"
BAD_REFERENCE = "bad reference"
FAILED = "pull failed"
REASONS = (
    NOT_FOUND,
    UNAUTHORIZED,
    WRONG_ARCHITECTURE,
    OVER_BUDGET,
    UNREACHABLE,
    BAD_REFERENCE,
    FAILED,
)

# The engine's words for each reason (Docker Hub, registry:2 and the engine's own).
_PATTERNS = (
    (
        UNAUTHORIZED,
        (
            "unauthorized",
            "authentication required",
            "no basic auth credentials",
            "denied",
            "forbidden",
        ),
    ),
    (
        NOT_FOUND,
        ("manifest unknown", "not found", "name unknown", "no such image", "does not exist"),
    ),
    (
        WRONG_ARCHITECTURE,
        (
            "no matching manifest",
            "does not match the detected host platform",
            "cannot be used on this platform",
        ),
    ),
    (
        UNREACHABLE,
        (
            "connection refused",
            "no such host",
            "i/o timeout",
            "timeout",
            "connection reset",
            "eof",
            "tls handshake",
            "502 ",
            "503 ",
            "504 ",
            "toomanyrequests",
            "temporary failure",
            "server misbehaving",
        ),
    ),
)
# Worth another try: the registry or the path to it may come back.
TRANSIENT = frozenset({UNREACHABLE})
_REFERENCE = re.compile(
    r"^(?:(?P<registry>[a-zA-Z0-9.-]+(?::\d+)?|\[[0-9a-fA-F:]+\](?::\d+)?)/)?"
    r"(?P<repository>[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*)"
    r"(?::(?P<tag>[\w][\w.-]{0,127}))?(?:@(?P<digest>sha256:[0-9a-f]{64}))?$"
)


class PullError(RuntimeError):
    """A pull that did not give an image: ``reason`` (one of ``REASONS``) and the engine's
    words in the message."""

    def __init__(self, reason: str, message: str):
        super().__init__(f"[{reason}] {message}")
        self.reason = reason


@dataclass(frozen=True)
class Reference:
    """An image reference, normalised as the engine does (``python`` is
    ``docker.io/library/python:latest``)."""

    registry: str
    repository: str
    tag: str = ""
    digest: str = ""

    @classmethod
    def parse(cls, text: str) -> Reference:
        match = _REFERENCE.match(text.strip())
        if not match:
            raise PullError(
                BAD_REFERENCE,
                f"{text!r} is not an image reference (name:tag or name@sha256:<64 hex>)",
            )
        registry = match["registry"]
        repository = match["repository"]
        # "owner/name": the first part is a registry only when it looks like a host.
        if registry and not ("." in registry or ":" in registry or registry == "localhost"):
            repository, registry = f"{registry}/{repository}", None
        registry = registry or DEFAULT_REGISTRY
        if registry in ("index.docker.io", "registry-1.docker.io"):
            registry = DEFAULT_REGISTRY
        if registry == DEFAULT_REGISTRY and "/" not in repository:
            repository = f"library/{repository}"
        tag = match["tag"] or ("" if match["digest"] else "latest")
        return cls(registry, repository, tag, match["digest"] or "")

    @property
    def name(self) -> str:
        """``registry/repository`` as the engine writes it (Docker Hub's without its host)."""
        if self.registry == DEFAULT_REGISTRY:
            return self.repository.removeprefix("library/")
        return f"{self.registry}/{self.repository}"

    def __str__(self) -> str:
        return (
            self.name
            + (f":{self.tag}" if self.tag else "")
            + (f"@{self.digest}" if self.digest else "")
        )

    def on(self, registry: str) -> Reference:
        """The same image on another registry (a mirror keeps Docker Hub's ``library/``)."""
        return Reference(registry, self.repository, self.tag, self.digest)


def mirrors(raw: str | None = None) -> dict[str, str]:
    """``REGISTRY_MIRRORS`` as registry -> mirror (``docker.io=127.0.0.1:5000,...``)."""
    raw = os.environ.get(MIRRORS_ENV, "") if raw is None else raw
    out: dict[str, str] = {}
    for item in raw.split(","):
        if not item.strip():
            continue
        source, sep, target = item.partition("=")
        if not sep or not source.strip() or not target.strip():
            raise ValueError(f"{MIRRORS_ENV}: {item.strip()!r} is not registry=mirror")
        out[source.strip()] = target.strip().removeprefix("https://").removeprefix("http://")
    return out


def source_of(reference: Reference, mapping: dict[str, str] | None = None) -> Reference:
    """Where ``reference`` is pulled from: its registry, or the mirror the setting names."""
    mapping = mirrors() if mapping is None else mapping
    mirror = mapping.get(reference.registry)
    return reference.on(mirror) if mirror else reference


@dataclass
class Progress:
    """A pull as it goes: layers seen and done, bytes downloaded of the bytes announced (the
    compressed layers), and the seconds left at the rate so far (None: not known yet)."""

    reference: str
    layers: int = 0
    layers_done: int = 0
    bytes_done: int = 0
    bytes_total: int = 0
    eta_sec: float | None = None
    status: str = "starting"
    attempt: int = 1

    def line(self) -> str:
        from sandbox.environments.eviction import human

        eta = f", ~{self.eta_sec:.0f} s left" if self.eta_sec is not None else ""
        return (
            f"pulling {self.reference}: {self.layers_done}/{self.layers} layers, "
            f"{human(self.bytes_done)} of {human(self.bytes_total)}{eta} ({self.status})"
        )


@dataclass
class Pulled:
    """An image on the engine and where it came from."""

    reference: str  # as the task names it
    source: str  # the reference pulled (a mirror's, when one is set)
    repo_digest: str  # name@sha256:... as the registry served it ("" for a local image)
    image_id: str
    pulled_at: float = 0.0  # 0: it was already on the engine, never pulled here
    size: int = 0
    # Whether the pull brought the image (its ID was not on the engine under another name,
    # as the runner image's is when a registry serves it back): only then is it the cache's.
    owned: bool = False
    architecture: str = ""
    layers: int = 0
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def classify(words: str) -> str:
    """The reason for an engine's error text."""
    low = words.lower()
    for reason, needles in _PATTERNS:
        if any(needle in low for needle in needles):
            return reason
    return FAILED


def host_architecture(client: Any) -> str:
    """The engine's architecture in image terms (``x86_64`` is ``amd64``)."""
    arch = str(client.info().get("Architecture") or "")
    return {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm"}.get(arch, arch)


def local_image(client: Any, reference: str) -> dict | None:
    """The engine's inspect of ``reference``, or None when it has no such image."""
    import docker.errors

    try:
        return client.api.inspect_image(reference)
    except docker.errors.ImageNotFound:
        return None
    except docker.errors.APIError as exc:
        if exc.status_code == 404:
            return None
        raise


def ensure_image(
    reference: str,
    *,
    progress: Callable[[Progress], None] | None = None,
    room: Callable[[int], int] | None = None,
    mapping: dict[str, str] | None = None,
    client: Any = None,
    retries: int = RETRIES,
) -> Pulled:
    """The image ``reference`` on the engine: found there, else pulled (see the module
    docstring). ``room(need)``: makes room for ``need`` bytes under the disk budget (evicting)
    and returns the bytes free (None: no budget); a pull whose layers cannot fit stops with
    OVER_BUDGET. Raises PullError."""
    from sandbox.docker_engine import engine_client

    ref = Reference.parse(reference)
    own = client is None
    client = client or engine_client(timeout=300)
    try:
        for name in _local_names(ref, mapping):
            found = local_image(client, name)
            if found is not None:
                _check_architecture(client, found, reference)
                return _pulled(reference, name, found, pulled_at=0.0)
        return _pull(
            client, ref, reference, progress=progress, room=room, mapping=mapping, retries=retries
        )
    finally:
        if own:
            client.close()


def _local_names(ref: Reference, mapping: dict[str, str] | None) -> list[str]:
    """Names the engine may already hold the image under: as asked, and as its mirror."""
    names = [str(ref)]
    source = source_of(ref, mapping)
    if source != ref:
        names.append(str(source))
    return names


def _pull(
    client: Any,
    ref: Reference,
    reference: str,
    *,
    progress: Callable[[Progress], None] | None,
    room: Callable[[int], int] | None,
    mapping: dict[str, str] | None,
    retries: int,
) -> Pulled:
    import docker.errors

    source = source_of(ref, mapping)
    started = time.monotonic()
    before = set(client.api.images(quiet=True, all=True))
    last = ""
    for attempt in range(1, retries + 1):
        state = Progress(str(source), attempt=attempt)
        try:
            layers = _stream(client, source, state, progress, room=room)
        except PullError as exc:
            if exc.reason not in TRANSIENT or attempt == retries:
                raise
            last = str(exc)
        except docker.errors.APIError as exc:
            words = str(exc.explanation or exc)
            reason = classify(words)
            if exc.status_code == 404 and reason == FAILED:
                reason = NOT_FOUND
            if reason not in TRANSIENT or attempt == retries:
                raise PullError(reason, f"pull of {source} failed: {words}") from exc
            last = words
        except docker.errors.DockerException as exc:  # the engine itself: connection errors
            if attempt == retries:
                raise PullError(UNREACHABLE, f"pull of {source}: {exc}") from exc
            last = str(exc)
        else:
            found = local_image(client, str(source))
            if found is None:
                raise PullError(FAILED, f"pull of {source} ended but the engine has no image")
            try:
                _check_architecture(client, found, reference)
                _check_budget(found, room, str(source))
            except PullError:
                if found["Id"] not in before:
                    _remove(client, found["Id"])
                raise
            pulled = _pulled(reference, str(source), found, pulled_at=time.time())
            pulled.owned = found["Id"] not in before
            pulled.layers = layers
            pulled.seconds = round(time.monotonic() - started, 1)
            return pulled
        if progress is not None:
            state.status = f"retrying after: {last.splitlines()[0][:200]}"
            progress(state)
        time.sleep(RETRY_WAIT_SEC * attempt)
    raise PullError(UNREACHABLE, f"pull of {source} failed {retries} times: {last}")


def _stream(
    client: Any,
    source: Reference,
    state: Progress,
    progress: Callable[[Progress], None] | None,
    *,
    room: Callable[[int], int] | None,
) -> int:
    """Run one pull, reporting progress; returns the number of layers. A pull whose announced
    (compressed) layers do not fit the room the budget leaves, evictions done, is stopped."""
    repository = source.name if source.registry != DEFAULT_REGISTRY else source.repository
    tag = source.digest or source.tag
    free = room(0) if room is not None else None
    totals: dict[str, int] = {}
    done: dict[str, int] = {}
    finished: set[str] = set()
    started = time.monotonic()
    events: Iterator[dict] = client.api.pull(repository, tag=tag, stream=True, decode=True)
    try:
        for event in events:
            if "error" in event:
                words = str(event.get("error"))
                raise PullError(classify(words), f"pull of {source} failed: {words}")
            layer, status = event.get("id", ""), str(event.get("status", ""))
            detail = event.get("progressDetail") or {}
            if layer and len(layer) == 12:  # a layer's short id (else a tag: "Pulling from")
                totals.setdefault(layer, 0)
                if detail.get("total") and status == "Downloading":
                    totals[layer] = int(detail["total"])
                    done[layer] = int(detail.get("current") or 0)
                if status in ("Download complete", "Pull complete", "Already exists"):
                    done[layer] = totals.get(layer, 0)
                if status in ("Pull complete", "Already exists"):
                    finished.add(layer)
            announced = sum(totals.values())
            if room is not None and free is not None and announced > free:
                free = room(announced)
                if announced > free:
                    raise PullError(
                        OVER_BUDGET,
                        f"{source}'s layers are {announced} bytes "
                        f"compressed, over the {free} bytes free "
                        "under the disk budget",
                    )
            state.layers, state.layers_done = len(totals), len(finished)
            state.bytes_total, state.bytes_done = announced, sum(done.values())
            state.status = status or state.status
            elapsed = time.monotonic() - started
            rate = state.bytes_done / elapsed if elapsed > 0 else 0
            left = state.bytes_total - state.bytes_done
            state.eta_sec = left / rate if rate > 0 and state.bytes_total else None
            if progress is not None:
                progress(state)
    finally:
        close = getattr(events, "close", None)
        if close is not None:
            close()  # a stopped pull: the engine cancels it when its client goes
    return len(totals)


def _check_architecture(client: Any, image: dict, reference: str) -> None:
    host = host_architecture(client)
    arch = str(image.get("Architecture") or "")
    if arch and host and arch != host:
        raise PullError(
            WRONG_ARCHITECTURE,
            f"{reference} is an image for {image.get('Os', 'linux')}/{arch}; this engine runs "
            f"{host}",
        )


def _check_budget(image: dict, room: Callable[[int], int] | None, name: str) -> None:
    """The image as pulled (unpacked) must fit too: else it goes again."""
    size = int(image.get("Size") or 0)
    if room is None:
        return
    free = room(size)
    if size > free:
        raise PullError(
            OVER_BUDGET,
            f"{name} takes {size} bytes unpacked, over the {free} bytes free under the disk budget",
        )


def _remove(client: Any, image_id: str) -> None:
    import docker.errors

    with contextlib.suppress(docker.errors.APIError):
        client.api.remove_image(image_id, force=True)


def _pulled(reference: str, source: str, image: dict, *, pulled_at: float) -> Pulled:
    digests = list(image.get("RepoDigests") or [])
    source_name = Reference.parse(source).name
    digest = next((d for d in digests if d.split("@", 1)[0] == source_name), "")
    return Pulled(
        reference=reference,
        source=source,
        repo_digest=digest or (digests[0] if digests else ""),
        image_id=image["Id"],
        pulled_at=pulled_at,
        size=int(image.get("Size") or 0),
        architecture=str(image.get("Architecture") or ""),
    )
