"""Build SWE-bench instances offline: base (Debian suite), env (repo, version), instance.

Every level is cached by a key over its inputs (``envspec``): a tree at
``<cache>/trees/<level>-<key>`` for bubblewrap and, when Docker is wanted, an image labelled
with the key. A second build of the same inputs does nothing; instances of one (repo, version)
share the env level. ``<cache>/instances/<instance_id>.json`` records the last build of each
instance: the pipeline runs attempts from it (``built_instance``).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tasks_app.swebench import dated_index, docker_images, envspec, trees
from tasks_app.swebench.repos import RepoError, RepoSource, cache_root, locked, repo_stem

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
    status: str  # built | cached | not buildable | failed
    reason: str = ""
    built: BuiltInstance | None = None
    log_tail: str = ""

    @property
    def ok(self) -> bool:
        return self.status in ("built", "cached")

    def line(self) -> str:
        why = f": {self.reason}" if self.reason else ""
        how = f" [{self.built.environment()}]" if self.built else ""
        return f"{self.instance_id}: {self.status}{how}{why}"


def built_instance(instance_id: str) -> BuiltInstance | None:
    """The last build of ``instance_id`` on this machine, or None."""
    path = cache_root() / "instances" / f"{instance_id}.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    known = {f for f in BuiltInstance.__dataclass_fields__}
    built = BuiltInstance(**{k: v for k, v in data.items() if k in known})
    return built if Path(built.rootfs, "testbed").is_dir() else None


class Builder:
    """Builds instances; ``docker``: also the Docker images (else the trees only)."""

    def __init__(
        self,
        source: RepoSource,
        *,
        docker: bool,
        mirror: str = "",
        log: Callable[[str], None] | None = None,
    ):
        self.source = source
        self.docker = docker
        self.mirror = mirror or os.environ.get("SWEBENCH_DEBIAN_MIRROR") or DEFAULT_MIRROR
        self.log = log or (lambda _line: None)
        self.root = cache_root()
        self.pip_cache = self.root / "pip-cache"
        self._index: dated_index.DatedIndex | None = None

    def index_url(self, date: str) -> str:
        """The PIP_INDEX_URL of installs as of ``date`` (the index serves from this process,
        started on first use, stopped by ``close``)."""
        if self._index is None:
            self._index = dated_index.DatedIndex().__enter__()
        return self._index.url(date)

    def close(self) -> None:
        if self._index is not None:
            self._index.__exit__(None, None, None)
            self._index = None

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
        seconds: dict[str, float] = {}
        try:
            base_key, base_tree = self._base(recipe.env.suite, seconds)
            _, repo_id = self.source.bare_repo(recipe.repo, instance_id=instance_id)
            env_key = recipe.env.key(base_key, repo_id)
            env_tree, env_tag = self._env(recipe.env, env_key, base_key, base_tree, seconds)
            key = recipe.key(env_key)
            built = self._instance(recipe, key, env_tree, env_tag, seconds)
        except envspec.NotBuildable as exc:
            return BuildOutcome(instance_id, "not buildable", str(exc))
        except (trees.BuildStepError, RepoError) as exc:
            tail = "\n".join(getattr(exc, "log", "").splitlines()[-25:])
            return BuildOutcome(instance_id, "failed", str(exc), log_tail=tail)
        built.seconds = seconds
        built.cold_seconds = {
            "base": _cold(base_tree),
            "env": _cold(env_tree),
            "instance": _cold(Path(built.rootfs)),
        }
        built.python_asked = recipe.env.python_asked
        built.date, built.env_date = recipe.date, recipe.env.date
        built.note = "; ".join(n for n in (recipe.env.note, built.note) if n)
        self._record(built)
        status = "built" if any(seconds.values()) else "cached"
        return BuildOutcome(instance_id, status, built.note, built=built)

    # --- levels ----------------------------------------------------------------------------

    def _tree(self, name: str) -> Path:
        return self.root / "trees" / name

    def _base(self, suite: str, seconds: dict[str, float]) -> tuple[str, Path]:
        key = envspec.base_key(suite)
        tree = self._tree(f"base-{suite}-{key}")
        tag = f"agentbench/swebench-base.{suite}:{key}"
        with locked(f"base-{key}"):
            started, built = time.monotonic(), False
            if not tree.is_dir():
                self.log(f"building base {suite} (debootstrap)")
                with trees.staging(tree) as work:
                    self._debootstrap(work, suite)
                built = True
            if self.docker and docker_images.image_key(tag) != key:
                docker_images.import_base(tree, tag, key, venv_bin=f"{envspec.VENV}/bin")
                built = True
            seconds["base"] = round(time.monotonic() - started, 1) if built else 0.0
            _note_cold(tree, seconds["base"])
        return key, tree

    def _debootstrap(self, work: Path, suite: str) -> None:
        trees.debootstrap(
            work, suite, envspec.BASE_PACKAGES, self.mirror, log=work.with_suffix(".log")
        )
        work.with_suffix(".log").unlink(missing_ok=True)
        trees.run(
            ["chroot", str(work), "useradd", "--uid", str(trees.AGENT_UID), "--user-group",
             "--create-home", "--shell", "/bin/bash", "agent"],
            what="useradd agent",
        )  # fmt: skip
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
        seconds: dict[str, float],
    ) -> tuple[Path, str]:
        stem = repo_stem(recipe.repo).lower()
        tree = self._tree(f"env-{stem}-{recipe.version}-{key}")
        tag = f"agentbench/swebench-env.{stem}.{recipe.version}:{key}"
        with locked(f"env-{key}"):
            started, built = time.monotonic(), False
            if not tree.is_dir():
                self.log(f"building env {recipe.repo} {recipe.version} as of {recipe.date}")
                with trees.staging(tree) as work:
                    trees.hardlink_copy(base_tree, work)
                    self._env_steps(work, recipe)
                built = True
            if self.docker and docker_images.image_key(tag) != key:
                parent = f"agentbench/swebench-base.{recipe.suite}:{base_key}"
                docker_images.build_layer(base_tree, tree, parent, tag, key)
                built = True
            seconds["env"] = round(time.monotonic() - started, 1) if built else 0.0
            _note_cold(tree, seconds["env"])
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
        seconds: dict[str, float],
    ) -> BuiltInstance:
        tree = self._tree(f"instance-{recipe.instance_id}-{key}".lower())
        tag = f"agentbench/swebench-eval.{recipe.instance_id.lower()}:{key}"
        note = ""
        with locked(f"instance-{key}"):
            started, built = time.monotonic(), False
            if not tree.is_dir():
                built = True
                self.log(f"building instance {recipe.instance_id}")
                bare = self.source.check_commit(
                    recipe.repo, recipe.base_commit, instance_id=recipe.instance_id,
                    what="base_commit",
                )  # fmt: skip
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
                            # Installs as of the instance's date; the pins are -c of its
                            # pip commands (envspec), never PIP_CONSTRAINT.
                            "PIP_INDEX_URL": self.index_url(recipe.date),
                            "PYTHONDONTWRITEBYTECODE": "1",
                        },
                        pip_cache=self.pip_cache,
                        timeout=INSTANCE_TIMEOUT_SEC,
                        what=f"install of {recipe.instance_id}",
                    )
            if self.docker and docker_images.image_key(tag) != key:
                docker_images.build_layer(env_tree, tree, env_tag, tag, key)
                built = True
            seconds["instance"] = round(time.monotonic() - started, 1) if built else 0.0
            _note_cold(tree, seconds["instance"])
        dirty = subprocess.run(
            ["git", "-C", str(tree / "testbed"), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True,
        ).stdout.strip()  # fmt: skip
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
        """Drop an instance's previous build (its inputs changed): the instance level only;
        base and env levels may serve other instances."""
        with locked(f"instance-{old.key}"):
            if Path(old.rootfs).is_dir():
                subprocess.run(["rm", "-rf", "--one-file-system", old.rootfs], check=False)
            Path(old.rootfs + ".build.json").unlink(missing_ok=True)
            if old.image and self.docker:
                subprocess.run(["docker", "image", "rm", old.image], capture_output=True)


def _note_cold(tree: Path, seconds: float) -> None:
    """Remember how long ``tree``'s level took to build (the first time: cold)."""
    path = tree.with_name(tree.name + ".build.json")
    if seconds and not path.exists():
        path.write_text(json.dumps({"seconds": seconds}))


def _cold(tree: Path) -> float:
    try:
        return float(json.loads(tree.with_name(tree.name + ".build.json").read_text())["seconds"])
    except (OSError, ValueError, KeyError):
        return 0.0


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""
