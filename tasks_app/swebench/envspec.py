"""What the official harness installs for an instance, as build steps this machine can run.

The reference is the official ``swebench`` package, pinned at 4.1.0 in pyproject.toml: it is
the last release that ships the per-(repo, version) specification table
(``swebench.harness.constants.MAP_REPO_VERSION_TO_SPECS``) and the requirements helpers; 5.x
dropped both. Its data is used as is; what differs is how it is applied here:

- conda is not available. The official ``testbed`` conda environment (``conda create -n testbed
  python=X``) becomes a venv at ``/opt/venv`` made by the Debian suite's own Python, whose
  version picks the suite (``SUITES``). A version no reachable suite has is not buildable.
- conda packages named by ``packages`` ("numpy", "pandas scipy") are installed with pip under
  the same names; a conda ``environment.yml`` is not buildable.
- ``requirements.txt`` is read from our git copy at ``environment_setup_commit`` (the official
  helper downloads it from GitHub), with the same ``-r`` expansion, exclusions and the official
  ``clean_requirements`` replacements.
- The archives hold one commit, no release tags: /testbed gets a tag ``v<version>`` (the
  instance's version) on base_commit so that setuptools_scm/versioneer versions resolve.
- Pip resolves to today's releases unless pinned: the pins that keep an old environment working
  are listed in ``PIP_PINS`` below, the one place for them.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import shlex
from dataclasses import dataclass, field
from typing import Any

from tasks_app.swebench.repos import RepoSource

# Bump when the build steps below change meaning: every key (and so every image) changes.
RECIPE_VERSION = 1
VENV = "/opt/venv"
TESTBED = "/testbed"
# Debian suites reachable from this machine's mirror, by the Python version they ship.
SUITES = {"3.9": "bullseye", "3.11": "bookworm", "3.13": "trixie"}
# Packages of the base level (debootstrap --include); build-essential and python3-dev build
# the sdists some old pins need.
BASE_PACKAGES = (
    "python3,python3-venv,python3-dev,python3-pip,git,build-essential,ca-certificates,patch,locales"
)
# Pins for drift since the dataset was made (releases yanked, or new major versions that the
# old code cannot run with), applied as pip constraints to every install of that repo (and
# version, when given). Each with the reason it is needed.
PIP_PINS: dict[str, list[tuple[str, str]]] = {
    "pvlib/pvlib-python": [
        ("numpy<2", "pvlib's conftest uses np.Inf, removed in NumPy 2.0 (June 2024)"),
    ],
    "pydicom/pydicom": [
        (
            "pytest<8",
            "pydicom 2.x test classes use nose-style setup(), which pytest 8 no longer calls",
        ),
    ],
    "pylint-dev/astroid": [
        (
            "pip<25.3",
            "astroid 2.13/2.14 build with setuptools~=62.6, which has no PEP 660 editable hook; "
            "pip 25.3 dropped the `setup.py develop` fallback the official images installed with",
        )
    ],
}


class NotBuildable(Exception):
    """The instance's specification needs something this machine cannot have."""


@dataclass(frozen=True)
class EnvRecipe:
    """The env level of one (repo, version): a venv with the specification's packages."""

    repo: str
    version: str
    python: str
    suite: str
    env_commit: str
    commands: tuple[str, ...]
    apt_packages: tuple[str, ...] = ()
    spec: dict[str, Any] = field(default_factory=dict)
    pins: tuple[str, ...] = ()  # pip constraints of every install in this env (PIP_PINS)

    def key(self, base_key: str, repo_id: str) -> str:
        return _digest(
            {
                "level": "env",
                "base": base_key,
                "repo": self.repo,
                "repo_id": repo_id,
                "version": self.version,
                "commit": self.env_commit,
                "commands": self.commands,
                "apt": self.apt_packages,
                "recipe": RECIPE_VERSION,
                # Only when there are any: adding the field changed no other key.
                **({"pins": self.pins} if self.pins else {}),
            }
        )


@dataclass(frozen=True)
class InstanceRecipe:
    """The instance level: /testbed at base_commit, installed as the specification says."""

    instance_id: str
    repo: str
    base_commit: str
    commands: tuple[str, ...]
    env: EnvRecipe

    @property
    def version_tag(self) -> str:
        """The tag put on base_commit in /testbed (see ``trees.checkout_testbed``)."""
        return f"v{self.env.version}"

    def key(self, env_key: str) -> str:
        return _digest(
            {
                "level": "instance",
                "env": env_key,
                "instance": self.instance_id,
                "commit": self.base_commit,
                "commands": self.commands,
                "tag": self.version_tag,
                "recipe": RECIPE_VERSION,
            }
        )


def _digest(data: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def base_key(suite: str) -> str:
    return _digest(
        {"level": "base", "suite": suite, "packages": BASE_PACKAGES, "recipe": RECIPE_VERSION}
    )


def official_spec(repo: str, version: str) -> dict[str, Any]:
    from swebench.harness.constants import MAP_REPO_VERSION_TO_SPECS

    specs = MAP_REPO_VERSION_TO_SPECS.get(repo)
    if specs is None:
        raise NotBuildable(f"the official harness has no specification for repository {repo}")
    spec = specs.get(version)
    if spec is None:
        raise NotBuildable(f"the official harness has no specification for {repo} {version}")
    return dict(spec)


def suite_for(python: str) -> str:
    suite = SUITES.get(python)
    if suite is None:
        have = ", ".join(f"{s} {v}" for v, s in SUITES.items())
        raise NotBuildable(
            f"the specification asks for Python {python}: no Debian suite reachable here has "
            f"it ({have}) and conda is not available"
        )
    return suite


def pip_constraints(repo: str, version: str) -> list[str]:
    pins = PIP_PINS.get("*", []) + PIP_PINS.get(repo, []) + PIP_PINS.get(f"{repo}@{version}", [])
    return [pin for pin, _why in pins]


def env_recipe(instance: dict[str, Any], source: RepoSource) -> EnvRecipe:
    """The env level an instance needs. Raises NotBuildable or RepoError."""
    repo, version = instance["repo"], str(instance["version"])
    spec = official_spec(repo, version)
    python = str(spec.get("python", "3.9"))
    suite = suite_for(python)
    env_commit = instance.get("environment_setup_commit") or instance["base_commit"]
    source.check_commit(
        repo, env_commit, instance_id=instance["instance_id"], what="environment_setup_commit"
    )
    pip = f"{VENV}/bin/python -m pip install -c /etc/agentbench-pip-constraints.txt"
    commands = [
        # conda create -n testbed python=X: a venv of the suite's Python, with the installers
        # conda would bring (current pip, setuptools and wheel).
        f"python{python} -m venv {VENV}",
        f"{pip} --upgrade pip setuptools wheel",
    ]
    packages = str(spec.get("packages", "") or "")
    if packages == "requirements.txt":
        reqs = requirements_from_archive(instance, env_commit, source)
        commands.append(f"cat > /tmp/requirements.txt <<'EOF_59812759871'\n{reqs}\nEOF_59812759871")
        commands.append(f"{pip} -r /tmp/requirements.txt")
    elif packages == "environment.yml":
        raise NotBuildable("the specification installs a conda environment.yml (no conda here)")
    elif packages:
        commands.append(f"{pip} {packages}")  # conda package names, mostly the same on PyPI
    if spec.get("pip_packages"):
        commands.append(f"{pip} " + " ".join(shlex.quote(p) for p in spec["pip_packages"]))
    apt = spec.get("apt-pkgs") or []
    return EnvRecipe(
        repo=repo,
        version=version,
        python=python,
        suite=suite,
        env_commit=env_commit,
        commands=tuple(commands),
        apt_packages=tuple(apt),
        spec=spec,
        pins=tuple(pip_constraints(repo, version)),
    )


def instance_recipe(instance: dict[str, Any], source: RepoSource) -> InstanceRecipe:
    """The instance level (and its env level). Raises NotBuildable or RepoError."""
    from swebench.harness.constants import MAP_REPO_TO_INSTALL

    env = env_recipe(instance, source)
    source.check_commit(
        instance["repo"], instance["base_commit"], instance_id=instance["instance_id"],
        what="base_commit",
    )  # fmt: skip
    commands: list[str] = []
    if instance["repo"] in MAP_REPO_TO_INSTALL:
        commands.append(MAP_REPO_TO_INSTALL[instance["repo"]])
    commands += list(env.spec.get("pre_install") or [])
    if env.spec.get("install"):
        commands.append(str(env.spec["install"]))
    for command in commands:
        if "conda " in command or "conda\n" in command:
            raise NotBuildable(f"an install step uses conda (not available here): {command}")
    return InstanceRecipe(
        instance_id=instance["instance_id"],
        repo=instance["repo"],
        base_commit=instance["base_commit"],
        commands=tuple(commands),
        env=env,
    )


def requirements_from_archive(instance: dict[str, Any], commit: str, source: RepoSource) -> str:
    """The official ``get_requirements`` for ``instance``, reading our git copy instead of
    GitHub: the first of the repository's requirement paths that exists, ``-r`` files
    inlined, ``-e .``/comments/``.[test`` lines dropped, then the official clean-up."""
    from swebench.harness.constants import MAP_REPO_TO_REQS_PATHS
    from swebench.harness.test_spec.python import clean_requirements

    repo, instance_id = instance["repo"], instance["instance_id"]
    paths = MAP_REPO_TO_REQS_PATHS.get(repo) or []
    for req_path in paths:
        text = source.read_file(repo, commit, req_path, instance_id=instance_id)
        if text is not None:
            break
    else:
        raise NotBuildable(
            f"no requirements file at {paths} in {repo} at environment_setup_commit {commit}"
        )

    def excluded(line: str) -> bool:
        return any(line.strip().startswith(x) for x in ["-e .", "#", ".[test"])

    req_dir = posixpath.dirname(req_path)
    original, additional = [], []
    for line in text.split("\n"):
        if line.strip().startswith("-r"):
            name = line[len("-r") :].strip()
            extra = source.read_file(
                repo, commit, posixpath.join(req_dir, name), instance_id=instance_id
            )
            for extra_line in (extra or "").split("\n"):
                if not excluded(extra_line):
                    additional.append(extra_line)
        elif not excluded(line):
            original.append(line)
    additional.append("\n".join(original))
    return str(clean_requirements("\n".join(additional)))
