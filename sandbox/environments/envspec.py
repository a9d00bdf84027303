"""What the official harness installs for an instance, as build steps this machine can run.

The reference is the official ``swebench`` package, pinned at 4.1.0 in pyproject.toml: it is
the last release that ships the per-(repo, version) specification table
(``swebench.harness.constants.MAP_REPO_VERSION_TO_SPECS``) and the requirements helpers; 5.x
dropped both. Its data is used as is; what differs is how it is applied here:

- conda is not available. The official ``testbed`` conda environment (``conda create -n testbed
  python=X``) becomes a venv at ``/opt/venv`` made by a Debian suite's own Python
  (``interpreter_for``): the suite shipping X, or, when none does, the nearest newer one, and
  the environment is then *approximate* (asked and used are recorded and shown).
- conda package lists and ``environment.yml`` are translated into pip installs through the
  one table in ``conda.py``.
- ``requirements.txt`` and ``environment.yml`` are read from our git copy at
  ``environment_setup_commit`` (the official helpers download them from GitHub), cleaned as
  the official helpers do.
- The archives hold one commit, no release tags: /testbed gets a tag ``v<version>`` (the
  instance's version) on base_commit so that setuptools_scm/versioneer versions resolve.
- Every install resolves as of a date (``dated_index``): the env level as of its
  ``environment_setup_commit``, the instance level as of the instance's ``created_at``, each
  moved later when the specification names a release uploaded after it, and never before its
  interpreter had wheels (``PYTHON_FLOOR``). Pins for what time does not fix are in
  ``PIP_PINS``, the one place for them.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sandbox.environments import conda, venv_links
from sandbox.environments.dated_index import format_time, parse_time, release_uploaded
from sandbox.environments.repos import RepoSource, cache_root

# Bump when the build steps below change meaning: every key (and so every image) changes.
# 2: installs as of a date (the date is in the keys), conda translation, approximate pythons.
# 3: the suite's python started through a link to the venv's is the venv's (venv_links).
RECIPE_VERSION = 3
# The base level's own recipe version: version 2 changed no base, so no debootstrap is redone.
BASE_RECIPE_VERSION = 1
VENV = "/opt/venv"
TESTBED = "/testbed"
CONSTRAINTS = "/etc/agentbench-pip-constraints.txt"
# Debian suites reachable from this machine's mirror, by the Python version they ship. No
# reachable registry has another CPython that runs offline (README, "SWE-bench offline").
SUITES = {"3.9": "bullseye", "3.11": "bookworm", "3.13": "trixie"}
# The earliest date an install on each interpreter resolves as of: when the last of the
# compiled packages these repositories use had a manylinux wheel for it (numpy, scipy, pandas,
# matplotlib, numba/llvmlite, tables, h5py, netCDF4, NREL-PySAM, statsmodels, lxml, cftime,
# pyproj, shapely; measured on the index: llvmlite is last each time, 3.9 2021-03-12, 3.11
# 2023-05-02, 3.13 2025-01-20). Before it pip would build some of them from sdists (llvmlite
# needs LLVM, scipy a Fortran toolchain) or find no release at all (NREL-PySAM has no sdist).
PYTHON_FLOOR = {
    "3.9": "2021-03-15T00:00:00Z",
    "3.11": "2023-05-15T00:00:00Z",
    "3.13": "2025-02-01T00:00:00Z",
}
# Packages of the base level (debootstrap --include); build-essential and python3-dev build
# the sdists some old pins need.
BASE_PACKAGES = (
    "python3,python3-venv,python3-dev,python3-pip,git,build-essential,ca-certificates,patch,locales"
)
# Pins for what dated installs do not fix, applied as pip constraints (``-c``, never through
# PIP_CONSTRAINT, which would reach pip's isolated build environments) to every install of
# that repo (and version, when given). Each with the reason and the instances it serves.
PIP_PINS: dict[str, list[tuple[str, str]]] = {}

# Labels of an imported SWE-bench task: its environment builds here with the Python its
# specification asks for, or with a newer one (``interpreter_for``).
ENV_EXACT_LABEL = "env-exact"
ENV_APPROXIMATE_LABEL = "env-approximate"

UploadTimes = Callable[[str, str], "datetime | None"]


class NotBuildable(Exception):
    """The instance's specification needs something this machine cannot have."""


@dataclass(frozen=True)
class EnvRecipe:
    """The env level of one (repo, version): a venv with the specification's packages."""

    repo: str
    version: str
    python: str  # the interpreter the level uses ...
    suite: str
    env_commit: str
    commands: tuple[str, ...]
    apt_packages: tuple[str, ...] = ()
    spec: dict[str, Any] = field(default_factory=dict)
    pins: tuple[str, ...] = ()  # pip constraints of every install in this env (PIP_PINS)
    python_asked: str = ""  # ... and the one the specification asks for
    date: str = ""  # installs resolve as of this time (``dated_index``)
    date_why: str = ""
    note: str = ""  # what was translated or left out

    @property
    def approximate(self) -> bool:
        return bool(self.python_asked) and self.python_asked != self.python

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
                "date": self.date,
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
    date: str = ""  # installs resolve as of this time
    date_why: str = ""

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
                "date": self.date,
            }
        )


def _digest(data: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def base_key(suite: str) -> str:
    return _digest(
        {"level": "base", "suite": suite, "packages": BASE_PACKAGES, "recipe": BASE_RECIPE_VERSION}
    )


def official_spec(repo: str, version: str) -> dict[str, Any]:
    from swebench.harness.constants import MAP_REPO_TO_EXT, MAP_REPO_VERSION_TO_SPECS

    specs = MAP_REPO_VERSION_TO_SPECS.get(repo)
    if specs is None:
        raise NotBuildable(f"the official harness has no specification for repository {repo}")
    language = MAP_REPO_TO_EXT.get(repo, "py")
    if language != "py":
        # Only Python environments are built here; the others run on their official images.
        raise NotBuildable(
            f"{repo} is a {language} repository: only Python instances build offline "
            "(use its official image: ab swebench build --source image)"
        )
    spec = specs.get(version)
    if spec is None:
        raise NotBuildable(f"the official harness has no specification for {repo} {version}")
    return dict(spec)


def _version_tuple(version: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in version.split("."))
    except ValueError as exc:
        raise NotBuildable(f"the specification asks for Python {version!r}: not a version") from exc


def interpreter_for(asked: str) -> tuple[str, str]:
    """(the Python version used, its Debian suite) for the version a specification asks for.

    The suite shipping ``asked`` when there is one (an exact environment); otherwise the
    nearest newer Python a suite ships, as an approximate environment: code written for an
    older Python 3 mostly runs on a newer one, the reverse not (3.5-3.8 get 3.9, 3.10 gets
    3.11, 3.12 gets 3.13). Python 2, or a version newer than every suite's, is not buildable.
    """
    if asked in SUITES:
        return asked, SUITES[asked]
    wanted = _version_tuple(asked)
    newer = sorted((v for v in SUITES if _version_tuple(v) > wanted), key=_version_tuple)
    have = ", ".join(f"{s} {v}" for v, s in SUITES.items())
    if wanted[0] != 3 or not newer:
        raise NotBuildable(
            f"the specification asks for Python {asked}: no Debian suite reachable here has it "
            f"or a newer Python 3 ({have}), and conda is not available"
        )
    return newer[0], SUITES[newer[0]]


def environment_label(repo: str, version: str) -> str | None:
    """``env-exact`` or ``env-approximate`` for an instance of (repo, version), from the
    specification alone (the import labels tasks with it); None when none can be built."""
    try:
        asked = str(official_spec(repo, version).get("python", "3.9"))
        used, _suite = interpreter_for(asked)
    except NotBuildable:
        return None
    return ENV_EXACT_LABEL if used == asked else ENV_APPROXIMATE_LABEL


def approximate_pythons(repo: str, version: str) -> tuple[str, str]:
    """(the Python the specification asks for, the one used here), "" when not known."""
    try:
        asked = str(official_spec(repo, version).get("python", "3.9"))
        return asked, interpreter_for(asked)[0]
    except NotBuildable:
        return "", ""


def suite_for(python: str) -> str:
    return interpreter_for(python)[1]


def pip_constraints(repo: str, version: str) -> list[str]:
    pins = PIP_PINS.get("*", []) + PIP_PINS.get(repo, []) + PIP_PINS.get(f"{repo}@{version}", [])
    return [pin for pin, _why in pins]


_EXACT = re.compile(
    r"(?<![\w.-])([A-Za-z0-9][A-Za-z0-9_.\-]*)(?:\[[^\]]*\])?==([0-9][A-Za-z0-9_.+!-]*)"
)


def exact_pins(texts: list[str]) -> list[tuple[str, str]]:
    """The ``name==version`` requirements named in ``texts`` (commands or requirement lines),
    wildcards and ``===`` left out."""
    found = []
    for text in texts:
        for match in _EXACT.finditer(text):
            if match.group(2).endswith("*") or text[match.end(2) : match.end(2) + 1] == "*":
                continue
            pin = (match.group(1), match.group(2).rstrip("."))
            if pin not in found:
                found.append(pin)
    return found


def relaxed(requirement: str) -> str:
    """An exact pin as its release series (``numpy==1.23.0`` -> ``numpy~=1.23.0``: 1.23.0 or a
    later 1.23.x); anything else unchanged. On an approximate environment the specification's
    exact pins were chosen for an older Python: a later patch release of the same series is
    often the first to support the newer one (numpy 1.23.2 for 3.11; pandas 1.5.3 needs it)."""
    match = re.fullmatch(
        r"\s*([A-Za-z0-9][A-Za-z0-9_.\-]*(?:\[[^\]]*\])?)==([0-9][0-9.]*[0-9])\s*", requirement
    )
    if not match or "." not in match.group(2):
        return requirement
    return f"{match.group(1)}~={match.group(2)}"


def dated(
    anchor: str, what: str, python: str, pins: list[tuple[str, str]], uploaded: UploadTimes
) -> tuple[str, str]:
    """(the cutoff an install resolves as of, why): ``anchor`` (``what`` says what it is),
    moved to just after the upload of any release named exactly that came later (a
    specification that pins a release was assembled after it), and to the interpreter's
    floor (``PYTHON_FLOOR``)."""
    cutoff = parse_time(anchor)
    why = what
    for name, version in pins:
        when = uploaded(name, version)
        if when is None:
            raise NotBuildable(f"the specification pins {name}=={version}: no such release on PyPI")
        if when >= cutoff:
            cutoff = when.replace(microsecond=0) + _SECOND
            why = f"the upload of {name}=={version}, which the specification pins"
    floor = PYTHON_FLOOR.get(python)
    if floor and parse_time(floor) > cutoff:
        cutoff = parse_time(floor)
        why = f"the first wheels for Python {python} (PYTHON_FLOOR; {what} is earlier)"
    return format_time(cutoff), why


def default_upload_times() -> UploadTimes:
    cache = cache_root() / "pypi-releases.json"
    return lambda name, version: release_uploaded(name, version, cache=cache)


def env_recipe(
    instance: dict[str, Any], source: RepoSource, uploaded: UploadTimes | None = None
) -> EnvRecipe:
    """The env level an instance needs. Raises NotBuildable or RepoError."""
    repo, version = instance["repo"], str(instance["version"])
    spec = official_spec(repo, version)
    asked = str(spec.get("python", "3.9"))
    python, suite = interpreter_for(asked)
    env_commit = instance.get("environment_setup_commit") or instance["base_commit"]
    source.check_commit(
        repo, env_commit, instance_id=instance["instance_id"], what="environment_setup_commit"
    )
    pins = tuple(pip_constraints(repo, version))
    pip = f"{VENV}/bin/python -m pip install" + (f" -c {CONSTRAINTS}" if pins else "")
    commands = [
        # conda create -n testbed python=X: a venv of the suite's Python, with the installers
        # conda would bring (pip, setuptools and wheel as of the level's date).
        f"python{python} -m venv {VENV}",
        f"{pip} --upgrade pip setuptools wheel",
        *venv_link_hook(python),
    ]
    named: list[str] = []  # requirement texts, for the exact pins they name
    apt = list(spec.get("apt-pkgs") or [])
    note = ""
    approximate = python != asked
    relax = relaxed if approximate else (lambda requirement: requirement)
    packages = str(spec.get("packages", "") or "")
    if packages == "requirements.txt":
        reqs = requirements_from_archive(instance, env_commit, source)
        named.append(reqs)
        reqs = "\n".join(relax(line) for line in reqs.split("\n"))
        commands.append(f"cat > /tmp/requirements.txt <<'EOF_59812759871'\n{reqs}\nEOF_59812759871")
        commands.append(f"{pip} -r /tmp/requirements.txt")
    elif packages == "environment.yml":
        try:
            translation = conda.translate_environment_yml(
                environment_yml_from_archive(instance, env_commit, source),
                source=f"{repo} environment.yml at {env_commit}",
            )
        except ValueError as exc:
            raise NotBuildable(str(exc)) from exc
        named += translation.requirements + translation.pip_section
        commands += _translated(pip, translation, relax)
        apt += [p for p in translation.apt if p not in apt]
        note = translation.note()
    elif packages:
        translation = conda.translate_names(packages.split())
        named += translation.requirements
        commands += _translated(pip, translation, relax)
        apt += [p for p in translation.apt if p not in apt]
        note = translation.note()
    if spec.get("pip_packages"):
        commands.append(f"{pip} " + " ".join(shlex.quote(relax(p)) for p in spec["pip_packages"]))
        named += [str(p) for p in spec["pip_packages"]]
    loosened = [r for r in named if r != relax(r) and "\n" not in r]
    if loosened:
        note = "; ".join(
            n
            for n in (
                note,
                f"Python {python} for {asked}: exact pins taken as their release series "
                f"({', '.join(f'{r} -> {relax(r)}' for r in loosened)})",
            )
            if n
        )
    commit_date = source.commit_date(repo, env_commit, instance_id=instance["instance_id"])
    date, why = dated(
        commit_date,
        "the environment_setup_commit's date",
        python,
        exact_pins(named),
        uploaded or default_upload_times(),
    )
    return EnvRecipe(
        repo=repo,
        version=version,
        python=python,
        suite=suite,
        env_commit=env_commit,
        commands=tuple(commands),
        apt_packages=tuple(apt),
        spec=spec,
        pins=pins,
        python_asked=asked,
        date=date,
        date_why=why,
        note=note,
    )


def venv_link_hook(python: str) -> list[str]:
    """The steps that make the suite's python, started through a link to the venv's (``tox
    --current-env``), the venv's python, as a conda env's is (``venv_links``)."""
    site_dir = f"/usr/local/lib/python{python}/dist-packages"
    module = venv_links.MODULE
    source = Path(venv_links.__file__).read_text()
    return [
        f"mkdir -p {site_dir}",
        f"cat > {site_dir}/{module}.py <<'EOF_59812759871'\n{source}EOF_59812759871",
        f"echo 'import {module}' > {site_dir}/{module}.pth",
    ]


def _translated(pip: str, translation: conda.Translation, relax: Callable[[str], str]) -> list[str]:
    commands = []
    for requirements in (translation.requirements, translation.pip_section):
        if requirements:
            commands.append(f"{pip} " + " ".join(shlex.quote(relax(r)) for r in requirements))
    return commands


def instance_recipe(
    instance: dict[str, Any], source: RepoSource, uploaded: UploadTimes | None = None
) -> InstanceRecipe:
    """The instance level (and its env level). Raises NotBuildable or RepoError."""
    from swebench.harness.constants import MAP_REPO_TO_INSTALL

    uploaded = uploaded or default_upload_times()
    env = env_recipe(instance, source, uploaded)
    source.check_commit(
        instance["repo"],
        instance["base_commit"],
        instance_id=instance["instance_id"],
        what="base_commit",
    )
    commands: list[str] = []
    if instance["repo"] in MAP_REPO_TO_INSTALL:
        commands.append(MAP_REPO_TO_INSTALL[instance["repo"]])
    commands += list(env.spec.get("pre_install") or [])
    if env.spec.get("install"):
        commands.append(str(env.spec["install"]))
    for command in commands:
        if "conda " in command or "conda\n" in command:
            raise NotBuildable(f"an install step uses conda (not available here): {command}")
    if env.pins:
        # The pins as -c of each pip install: PIP_CONSTRAINT would also reach pip's isolated
        # build of /testbed and can make it fail ("missing the 'build_editable' hook").
        commands = [_PIP_INSTALL.sub(rf"\g<0> -c {CONSTRAINTS}", c) for c in commands]
    anchor = str(instance.get("created_at") or "")
    if not anchor:
        raise NotBuildable("the dataset row has no created_at: installs cannot be dated")
    date, why = dated(
        anchor, "the instance's created_at", env.python, exact_pins(commands), uploaded
    )
    if parse_time(env.date) > parse_time(date):
        # What the instance installs joins what the env level already holds, resolved as of
        # the env's date: resolved as of an earlier day it can pick releases older than, and
        # built against older versions of, what is installed (pvlib-1154: numba 0.53 beside
        # the env's numpy 1.24 fails to import).
        date = env.date
        why = f"the env level's date ({env.date_why}), later than the instance's created_at"
    return InstanceRecipe(
        instance_id=instance["instance_id"],
        repo=instance["repo"],
        base_commit=instance["base_commit"],
        commands=tuple(commands),
        env=env,
        date=date,
        date_why=why,
    )


_PIP_INSTALL = re.compile(r"\bpip install\b")
_SECOND = timedelta(seconds=1)


def environment_yml_from_archive(instance: dict[str, Any], commit: str, source: RepoSource) -> str:
    """The repository's ``environment.yml`` at ``commit`` (the official
    ``get_environment_yml`` reads it from GitHub)."""
    from swebench.harness.constants import MAP_REPO_TO_ENV_YML_PATHS

    repo = instance["repo"]
    paths = MAP_REPO_TO_ENV_YML_PATHS.get(repo) or ["environment.yml"]
    for path in paths:
        text = source.read_file(repo, commit, path, instance_id=instance["instance_id"])
        if text is not None:
            return text
    raise NotBuildable(
        f"no environment.yml at {paths} in {repo} at environment_setup_commit {commit}"
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
