"""Build SWE-bench instances offline: base (Debian suite), env (repo, version), instance.

Every level is cached by a key over its inputs (``envspec``): a tree at
``<cache>/trees/<level>-<key>`` for bubblewrap and, when Docker is wanted, an image labelled
with the key, with a record of both (``cache.Level``). A second build of the same inputs does
nothing; instances of one (repo, version) share the env level. ``<cache>/instances/
<instance_id>.json`` records the last build of each instance: the pipeline runs attempts from
it (``built_instance``, ``use_built_instance``).

A build holds a use lease (``cache.lease``) on each level from the moment it looks at it until
it is done, so nothing it stands on is evicted meanwhile, and a build lock per level
(``repos.locked``) while it builds one, so two builds (threads or processes) of instances that
share a level build it once: the second waits and finds it built. With a budget
(``SWEBENCH_CACHE_MAX_GB``) each level build first makes room for itself (``eviction``).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from sandbox.environments import cache, dated_index, docker_images, envspec, eviction, trees
from sandbox.environments.repos import RepoError, RepoSource, cache_root, locked, repo_stem

DEFAULT_MIRROR = "http://deb.debian.org/debian"
ENV_TIMEOUT_SEC = 3600
INSTANCE_TIMEOUT_SEC = 1800


@dataclass
class BuiltInstance:
    """Where a built instance is: the rootfs tree (bubblewrap) and the image (Docker)."""

    instance_id: str
    key: str
    base_commit: str
    rootfs: str
    image: str = ""
    python: str = ""
    python_asked: str = ""  # differs from python: an approximate environment
    date: str = ""  # the instance level's installs resolved as of this time ...
    env_date: str = ""  # ... and the env level's
    # Seconds each level took in this build (0: it was cached) ...
    seconds: dict[str, float] = field(default_factory=dict)
    # ... and when it was first built on this machine (cold: what bench/swebench_eval.py shows).
    cold_seconds: dict[str, float] = field(default_factory=dict)
    note: str = ""

    @property
    def approximate(self) -> bool:
        return bool(self.python_asked) and self.python_asked != self.python

    def environment(self) -> str:
        """How the environment was made, for the build line and the task page."""
        python = f"Python {self.python}"
        if self.approximate:
            python += f" for {self.python_asked} (approximate)"
        return f"{python}, installs as of {self.env_date[:10]} (env) / {self.date[:10]}"

    def has_image(self) -> bool:
        return bool(self.image) and docker_images.image_key(self.image) == self.key


@dataclass
class BuildOutcome:
    instance_id: str
    status: str  # built | cached | image (its official image: no build) | not buildable | failed
    reason: str = ""
    built: BuiltInstance | None = None
    log_tail: str = ""
    # Seconds this build waited for a level another build (thread or process) was building.
    waited: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status in ("built", "cached", "image")

    def line(self) -> str:
        why = f": {self.reason}" if self.reason else ""
        how = f" [{self.built.environment()}]" if self.built else ""
        return f"{self.instance_id}: {self.status}{how}{why}"


@dataclass(frozen=True)
class LevelEvent:
    """Progress of one level of a build: ``start`` (its build began: the lock is ours and the
    level is missing), ``done`` or ``failed``."""

    kind: str
    name: str
    state: str
    seconds: float = 0.0


@dataclass
class _Pass:
    """One build of one instance: seconds spent building each level, seconds waited for one
    another build held, and the use leases held until the build ends."""

    held: contextlib.ExitStack
    seconds: dict[str, float] = field(default_factory=dict)
    waited: dict[str, float] = field(default_factory=dict)


def built_instance(instance_id: str) -> BuiltInstance | None:
    """The last build of ``instance_id`` on this machine, or None."""
    path = cache_root() / "instances" / f"{instance_id}.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    # A record written by a newer (or another branch's) build may hold fields this one does
    # not know: the shared cache is read by every checkout on the machine.
    known = {f.name for f in fields(BuiltInstance)}
    built = BuiltInstance(**{k: v for k, v in data.items() if k in known})
    return built if Path(built.rootfs, "testbed").is_dir() else None


@contextlib.contextmanager
def use_built_instance(instance_id: str) -> Iterator[BuiltInstance | None]:
    """The last build of ``instance_id`` (or None), its instance level held under a use lease
    for the block: eviction and pruning leave it alone until the block ends."""
    for _ in range(3):
        built = built_instance(instance_id)
        if built is None:
            yield None
            return
        name = Path(built.rootfs).name
        with cache.lease(name):
            again = built_instance(instance_id)
            # Evicted or rebuilt between the look and the lease: look again.
            if again is not None and again.rootfs == built.rootfs:
                yield again
                return
    yield built_instance(instance_id)


class Builder:
    """Builds instances; ``docker``: also the Docker images (else the trees only).

    ``max_bytes``: the cache's budget (default ``SWEBENCH_CACHE_MAX_GB``; None: none).
    ``events`` hears each level start and end (progress); ``report`` gets the lines worth
    printing (evictions). Safe to share between threads: every level is built under its lock.
    """

    def __init__(
        self,
        source: RepoSource,
        *,
        docker: bool,
        mirror: str = "",
        log: Callable[[str], None] | None = None,
        max_bytes: int | str | None = "env",
        events: Callable[[LevelEvent], None] | None = None,
        report: Callable[[str], None] | None = None,
    ):
        self.source = source
        self.docker = docker
        self.mirror = mirror or os.environ.get("SWEBENCH_DEBIAN_MIRROR") or DEFAULT_MIRROR
        self.log = log or (lambda _line: None)
        self.root = cache_root()
        self.pip_cache = self.root / "pip-cache"
        # "env": SWEBENCH_CACHE_MAX_GB.
        self.max_bytes: int | None = (
            eviction.max_bytes_from_env() if isinstance(max_bytes, str) else max_bytes
        )
        self.events = events or (lambda _event: None)
        self.report = report or (lambda _line: None)

        self._index: dated_index.DatedIndex | None = None
        self._index_lock = threading.Lock()  # parallel builds share one index

    def index_url(self, date: str) -> str:
        """The PIP_INDEX_URL of installs as of ``date`` (the index serves from this process,
        started on first use, stopped by ``close``)."""
        with self._index_lock:
            if self._index is None:
                self._index = dated_index.DatedIndex().__enter__()
            return self._index.url(date)

    def close(self) -> None:
        self.source.close()  # a network source's leases on the commits it fetched
        with self._index_lock:
            if self._index is not None:
                self._index.__exit__(None, None, None)
                self._index = None

    def keys(self, instance: dict[str, Any]) -> tuple[str, str, str]:
        """(base, env, instance) level names of ``instance``, for scheduling; raises
        NotBuildable or RepoError as ``build`` would report them."""
        recipe = envspec.instance_recipe(instance, self.source)
        base_key = envspec.base_key(recipe.env.suite)
        _, repo_id = self.source.bare_repo(recipe.repo, instance_id=recipe.instance_id)
        env_key = recipe.env.key(base_key, repo_id)
        return (
            self._base_name(recipe.env.suite, base_key),
            self._env_name(recipe.env, env_key),
            self._instance_name(recipe, recipe.key(env_key)),
        )

    def base(self, suite: str) -> Path:
        """Build (or find) the base level of Debian ``suite``; returns its tree."""
        with contextlib.ExitStack() as held:
            _, tree = self._base(suite, _Pass(held))
        return tree

    def cached(self, name: str) -> bool:
        """Whether level ``name`` needs no work: its tree is there, and its image when Docker
        is wanted."""
        level = cache.read_level(name)
        if level is None or not level.tree.is_dir():
            return False
        if not self.docker:
            return True
        tag = level.image or ""
        return bool(tag) and docker_images.image_key(tag) == level.key

    def build(self, instance: dict[str, Any]) -> BuildOutcome:
        """Build what ``instance`` lacks. Never raises for a problem of the instance."""
        instance_id = instance["instance_id"]
        try:
            recipe = envspec.instance_recipe(instance, self.source)
        except dated_index.UpstreamError as exc:
            return BuildOutcome(instance_id, "failed", f"the package index: {exc}")
        except envspec.NotBuildable as exc:
            return BuildOutcome(instance_id, "not buildable", str(exc))
        except RepoError as exc:
            return BuildOutcome(instance_id, "failed", str(exc))
        run = _Pass(contextlib.ExitStack())
        try:
            with run.held:
                base_key, base_tree = self._base(recipe.env.suite, run)
                _, repo_id = self.source.bare_repo(recipe.repo, instance_id=instance_id)
                env_key = recipe.env.key(base_key, repo_id)
                env_tree, env_tag = self._env(recipe.env, env_key, base_key, base_tree, run)
                key = recipe.key(env_key)
                built = self._instance(recipe, key, env_tree, env_tag, run)
                self._served(env_tree.name, env_key, instance_id)
        except envspec.NotBuildable as exc:
            return BuildOutcome(instance_id, "not buildable", str(exc))
        except (trees.BuildStepError, RepoError) as exc:
            tail = "\n".join(getattr(exc, "log", "").splitlines()[-25:])
            return BuildOutcome(instance_id, "failed", str(exc), log_tail=tail)
        built.seconds = run.seconds
        built.cold_seconds = {
            "base": _cold(base_tree),
            "env": _cold(env_tree),
            "instance": _cold(Path(built.rootfs)),
        }
        built.python_asked = recipe.env.python_asked
        built.date, built.env_date = recipe.date, recipe.env.date
        built.note = "; ".join(n for n in (recipe.env.note, built.note) if n)
        self._record(built)
        status = "built" if any(run.seconds.values()) else "cached"
        waited = {k: v for k, v in run.waited.items() if v >= 1 and not run.seconds.get(k)}
        return BuildOutcome(instance_id, status, built.note, built=built, waited=waited)

    # --- levels ----------------------------------------------------------------------------

    def _tree(self, name: str) -> Path:
        return self.root / "trees" / name

    @staticmethod
    def _base_name(suite: str, key: str) -> str:
        return f"base-{suite}-{key}"

    @staticmethod
    def _env_name(recipe: envspec.EnvRecipe, key: str) -> str:
        return f"env-{repo_stem(recipe.repo).lower()}-{recipe.version}-{key}"

    @staticmethod
    def _instance_name(recipe: envspec.InstanceRecipe, key: str) -> str:
        return f"instance-{recipe.instance_id}-{key}".lower()

    @contextlib.contextmanager
    def _level(self, run: _Pass, kind: str, name: str, key: str) -> Iterator[None]:
        """Hold level ``name`` under a use lease until the whole build ends (nothing evicts it
        under us), and under its build lock for the block, timing the wait for the lock."""
        run.held.enter_context(cache.lease(name))
        asked = time.monotonic()
        with locked(f"{kind}-{key}"):
            run.waited[kind] = round(time.monotonic() - asked, 1)
            yield

    @contextlib.contextmanager
    def _building(self, kind: str, name: str) -> Iterator[None]:
        """Around the build of a missing level (tree or image): room in the budget for it
        first (the caller makes room again for what it really took), the progress events."""
        eviction.make_room(max_bytes=self.max_bytes, kind=kind, report=self.report)
        self.events(LevelEvent(kind, name, "start"))
        started = time.monotonic()
        try:
            yield
        except BaseException:
            self.events(LevelEvent(kind, name, "failed", time.monotonic() - started))
            raise
        self.events(LevelEvent(kind, name, "done", time.monotonic() - started))

    def _base(self, suite: str, run: _Pass) -> tuple[str, Path]:
        key = envspec.base_key(suite)
        name = self._base_name(suite, key)
        tree = self._tree(name)
        tag = f"{cache.image_repository('base', suite)}:{key}"
        with self._level(run, "base", name, key):
            started, built = time.monotonic(), False
            if not tree.is_dir() or (self.docker and docker_images.image_key(tag) != key):
                with self._building("base", name):
                    if not tree.is_dir():
                        self.log(f"building base {suite} (debootstrap)")
                        with trees.staging(tree) as work:
                            self._debootstrap(work, suite)
                    if self.docker and docker_images.image_key(tag) != key:
                        docker_images.import_base(tree, tag, key, venv_bin=f"{envspec.VENV}/bin")
                built = True
            run.seconds["base"] = round(time.monotonic() - started, 1) if built else 0.0
            self._level_record(
                cache.Level(name, "base", key, image=tag if self.docker else "", suite=suite),
                run.seconds["base"],
            )
        if built:
            eviction.make_room(max_bytes=self.max_bytes, report=self.report)
        return key, tree

    def _debootstrap(self, work: Path, suite: str) -> None:
        trees.debootstrap(
            work, suite, envspec.BASE_PACKAGES, self.mirror, log=work.with_suffix(".log")
        )
        work.with_suffix(".log").unlink(missing_ok=True)
        trees.run(
            [
                "chroot",
                str(work),
                "useradd",
                "--uid",
                str(trees.AGENT_UID),
                "--user-group",
                "--create-home",
                "--shell",
                "/bin/bash",
                "agent",
            ],
            what="useradd agent",
        )
        (work / "workspace").mkdir(exist_ok=True)
        os.chown(work / "workspace", trees.AGENT_UID, trees.AGENT_UID)
        # Docker and bubblewrap mount their own resolv.conf/hosts over these.
        (work / "etc/resolv.conf").write_text("")
        (work / "etc/hosts").write_text("127.0.0.1\tlocalhost\n::1\tlocalhost\n")
        (work / "etc/hostname").write_text("sandbox\n")
        trees.run(["chroot", str(work), "apt-get", "clean"], what="apt-get clean")

    def _env(
        self,
        recipe: envspec.EnvRecipe,
        key: str,
        base_key: str,
        base_tree: Path,
        run: _Pass,
    ) -> tuple[Path, str]:
        name = self._env_name(recipe, key)
        tree = self._tree(name)
        stem = repo_stem(recipe.repo).lower()
        tag = f"{cache.image_repository('env', f'{stem}.{recipe.version}')}:{key}"
        with self._level(run, "env", name, key):
            started, built = time.monotonic(), False
            if not tree.is_dir() or (self.docker and docker_images.image_key(tag) != key):
                with self._building("env", name):
                    if not tree.is_dir():
                        self.log(f"building env {recipe.repo} {recipe.version} as of {recipe.date}")
                        with trees.staging(tree) as work:
                            trees.hardlink_copy(base_tree, work)
                            self._env_steps(work, recipe)
                    if self.docker and docker_images.image_key(tag) != key:
                        parent = f"{cache.image_repository('base', recipe.suite)}:{base_key}"
                        docker_images.build_layer(base_tree, tree, parent, tag, key)
                built = True
            run.seconds["env"] = round(time.monotonic() - started, 1) if built else 0.0
            self._level_record(
                cache.Level(
                    name,
                    "env",
                    key,
                    parent=base_tree.name,
                    image=tag if self.docker else "",
                    repo=recipe.repo,
                    version=recipe.version,
                    suite=recipe.suite,
                ),
                run.seconds["env"],
            )
        if built:
            eviction.make_room(max_bytes=self.max_bytes, report=self.report)
        return tree, tag

    def _env_steps(self, work: Path, recipe: envspec.EnvRecipe) -> None:
        constraints = "\n".join(recipe.pins) + "\n"
        (work / envspec.CONSTRAINTS.lstrip("/")).write_text(constraints)
        if recipe.apt_packages:
            packages = " ".join(recipe.apt_packages)
            try:
                trees.run_in_tree(
                    work,
                    f"apt-get update -q && apt-get install -y -q {packages} && apt-get clean "
                    "&& rm -rf /var/lib/apt/lists/*",
                    what="apt-get install",
                )
            except trees.BuildStepError as exc:
                raise envspec.NotBuildable(
                    f"apt package(s) {packages} not available for Debian {recipe.suite}: "
                    + _last_line(exc.log)
                ) from exc
        trees.run_in_tree(
            work,
            "\n".join(recipe.commands),
            env={"PIP_INDEX_URL": self.index_url(recipe.date)},
            pip_cache=self.pip_cache,
            timeout=ENV_TIMEOUT_SEC,
            what=f"env {recipe.repo} {recipe.version}",
        )

    def _instance(
        self,
        recipe: envspec.InstanceRecipe,
        key: str,
        env_tree: Path,
        env_tag: str,
        run: _Pass,
    ) -> BuiltInstance:
        name = self._instance_name(recipe, key)
        tree = self._tree(name)
        tag = f"{cache.image_repository('instance', recipe.instance_id.lower())}:{key}"
        note = ""
        with self._level(run, "instance", name, key):
            started, built = time.monotonic(), False
            if not tree.is_dir() or (self.docker and docker_images.image_key(tag) != key):
                with self._building("instance", name):
                    if not tree.is_dir():
                        self.log(f"building instance {recipe.instance_id}")
                        self._instance_tree(recipe, tree, env_tree)
                    if self.docker and docker_images.image_key(tag) != key:
                        docker_images.build_layer(env_tree, tree, env_tag, tag, key)
                built = True
            run.seconds["instance"] = round(time.monotonic() - started, 1) if built else 0.0
            self._level_record(
                cache.Level(
                    name,
                    "instance",
                    key,
                    parent=env_tree.name,
                    image=tag if self.docker else "",
                    instance_id=recipe.instance_id,
                    repo=recipe.repo,
                    version=recipe.env.version,
                    suite=recipe.env.suite,
                ),
                run.seconds["instance"],
            )
        if built:
            eviction.make_room(max_bytes=self.max_bytes, report=self.report)
        dirty = subprocess.run(
            ["git", "-C", str(tree / "testbed"), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
        ).stdout.strip()
        if dirty:
            note = f"the install changed tracked files: {dirty.splitlines()[:3]}"
        return BuiltInstance(
            instance_id=recipe.instance_id,
            key=key,
            base_commit=recipe.base_commit,
            rootfs=str(tree),
            image=tag if self.docker else "",
            python=recipe.env.python,
            note=note,
        )

    def _instance_tree(self, recipe: envspec.InstanceRecipe, tree: Path, env_tree: Path) -> None:
        bare = self.source.check_commit(
            recipe.repo, recipe.base_commit, instance_id=recipe.instance_id, what="base_commit"
        )
        with trees.staging(tree) as work:
            trees.hardlink_copy(env_tree, work)
            venv = envspec.VENV.lstrip("/")
            trees.real_copy(env_tree / venv, work / venv)
            trees.checkout_testbed(
                work, bare, recipe.base_commit, envspec.TESTBED, tag=recipe.version_tag
            )
            trees.run_in_tree(
                work,
                "\n".join(recipe.commands),
                cwd=envspec.TESTBED,
                env={
                    "PATH": f"{envspec.VENV}/bin:{trees.PATH_ENV}",
                    "VIRTUAL_ENV": envspec.VENV,
                    # Installs as of the instance's date; the pins are -c of its pip commands
                    # (envspec), never PIP_CONSTRAINT.
                    "PIP_INDEX_URL": self.index_url(recipe.date),
                    "PYTHONDONTWRITEBYTECODE": "1",
                },
                pip_cache=self.pip_cache,
                timeout=INSTANCE_TIMEOUT_SEC,
                what=f"install of {recipe.instance_id}",
            )

    def _level_record(self, fresh: cache.Level, seconds: float) -> None:
        """Write the record of a level this build stands on (held under its build lock): what
        the build knows of it, its cold seconds the first time, its bytes once measured."""
        old = cache.read_level(fresh.name)
        level = fresh
        if old is not None:
            level.seconds = old.seconds
            level.built_at = old.built_at
            level.instances = old.instances
            level.tree_bytes = None if seconds else old.tree_bytes
            level.image_bytes = None if seconds else old.image_bytes
            if not fresh.image and old.image:
                level.image = old.image  # a bwrap-only build keeps the Docker image known
        if seconds and not level.seconds:
            level.seconds = seconds
        level.built_at = level.built_at or time.time()
        level.recipe = envspec.RECIPE_VERSION
        if level.tree_bytes is None or (level.image and level.image_bytes is None):
            cache.measure(level)
        if old is None or asdict(old) != asdict(level):
            cache.write_level(level)

    def _served(self, env_name: str, env_key: str, instance_id: str) -> None:
        """Note on the env level's record that ``instance_id`` was built on it."""
        with locked(f"env-{env_key}"):
            level = cache.read_level(env_name)
            if level is not None and instance_id not in level.instances:
                level.instances.append(instance_id)
                cache.write_level(level)

    def _record(self, built: BuiltInstance) -> None:
        folder = self.root / "instances"
        folder.mkdir(parents=True, exist_ok=True)
        previous = built_instance(built.instance_id)
        if previous and previous.key == built.key and not built.image:
            built.image = previous.image  # a bwrap-only rebuild keeps the Docker image known
        tmp = folder / f".{built.instance_id}.json.tmp"
        tmp.write_text(json.dumps(asdict(built), indent=2))
        tmp.rename(folder / f"{built.instance_id}.json")
        if previous and previous.key != built.key:
            self._remove(previous)

    def _remove(self, old: BuiltInstance) -> None:
        """Drop an instance's previous build (its inputs changed): the instance level only
        (base and env levels may serve other instances), unless an attempt still runs from
        it: ``ab swebench prune`` removes it later."""
        level = cache.read_level(Path(old.rootfs).name)
        if level is None:
            return
        with cache.exclusive(level.name) as free:
            if free:
                image = docker_images.level_image(old.image) if old.image else None
                eviction.remove_level(level, image)


def _cold(tree: Path) -> float:
    level = cache.read_level(tree.name)
    return level.seconds if level is not None else 0.0


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""
