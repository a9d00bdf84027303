"""A Python runtime for a CLI that needs a newer Python than the task's image (aider): a Debian
root made by debootstrap, and the CLI's pinned PyPI packages installed for it.

Why a root of its own: the SWE-bench images have Python 3.9 and must stay as the dataset made
them, so a CLI needing Python >= 3.10 cannot use the image's Python nor install one into it.
Running the CLI on the worker instead (as mini-swe-agent does) would put the workspace's edits
and the CLI's ``git`` on the worker; this way the CLI runs in the sandbox, edits the workspace
there, and its ``git`` is the image's. The root is mounted read-only beside the install, and
the CLI is started through the root's own dynamic loader
(``{runtime}/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 --library-path ... python3.X``), so
the image's glibc does not matter; the processes the CLI starts (``git``) are the image's own,
with the image's loader and libraries (``--library-path`` is not inherited).

The root (``kind: debian`` in a definition's ``runtime:``) is ``debootstrap --variant=minbase``
of the pinned suite with the Python package, from the mirror the offline builds use
(``SWEBENCH_DEBIAN_MIRROR``); only the files the definition keeps are copied into the cache
(the interpreter, its standard library, the shared libraries), and links that point out of the
root (``/etc/...``) are dropped, since inside the sandbox they would name the image's files.
The package's installed version must be the pinned one: a mirror that moved on is a
``RootError`` naming both versions (bump the definition), never a silent other Python.

The CLI's install (``kind: pypi`` on such a runtime) is its whole pinned dependency tree
installed with ``pip --target`` as wheels for that Python and platform (no build step runs),
then compiled to bytecode by the runtime's own interpreter (the mount is read-only, so Python
could not write its caches at run time). Needs root on the worker (debootstrap).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from runs.agents.cli.definition import AgentDefinition, InstallSpec

DEFAULT_MIRROR = "http://deb.debian.org/debian"
MIRROR_ENV = "SWEBENCH_DEBIAN_MIRROR"
DEBOOTSTRAP_TIMEOUT_SEC = 1200
LIB_DIR = "usr/lib/x86_64-linux-gnu"
LOADER = f"{LIB_DIR}/ld-linux-x86-64.so.2"
SITE = "site"  # the install's folder of packages (on the runtime's sys.path)
# The glibc of the oldest Debian suite a root is made from here (bookworm: 2.36): wheels for
# any manylinux up to it load in the root.
MAX_GLIBC_MINOR = 36


class RootError(RuntimeError):
    """The root cannot be made as pinned (install.py reports it as its InstallError)."""


def python_version(spec: InstallSpec) -> str:
    """``3.11`` for a root made for ``python3.11``."""
    return spec.package.removeprefix("python")


def python_argv(root: Path | str, spec: InstallSpec) -> list[str]:
    """The root's interpreter started through the root's loader (any host's glibc)."""
    return [
        f"{root}/{LOADER}",
        "--inhibit-cache",
        "--library-path",
        f"{root}/{LIB_DIR}",
        f"{root}/usr/bin/{spec.package}",
    ]


Run = Callable[..., str]


def build_root(label: str, spec: InstallSpec, staging: Path, run: Run) -> dict:
    """debootstrap the suite with the package into a scratch tree, check the package's
    version, and copy what ``spec.keep`` names into ``staging``. ``run``: install._run."""
    if os.geteuid() != 0:
        raise RootError(f"{label}: building a Debian root needs root (debootstrap)")
    if shutil.which("debootstrap") is None:
        raise RootError(f"{label}: debootstrap not found (apt-get install debootstrap)")
    mirror = os.environ.get(MIRROR_ENV) or DEFAULT_MIRROR
    tree = staging / ".root"
    try:
        run(
            [
                "debootstrap",
                "--variant=minbase",
                f"--include={spec.package}",
                spec.suite,
                str(tree),
                mirror,
            ],
            cwd=staging,
            timeout=DEBOOTSTRAP_TIMEOUT_SEC,
            what=f"{label}: debootstrap {spec.suite} {spec.package} from {mirror}",
        )
        versions = installed_versions(tree / "var/lib/dpkg/status")
        found = versions.get(spec.package)
        if found != spec.version:
            raise RootError(
                f"{label}: {spec.suite} has {spec.package} {found or 'not installed'}, the "
                f"definition pins {spec.version} (the mirror moved on: pin the new version)"
            )
        for name in spec.keep:
            source = tree / name
            if not source.exists():
                raise RootError(f"{label}: the root has no {name}")
            target = staging / name
            target.parent.mkdir(parents=True, exist_ok=True)
            if source.is_dir() and not source.is_symlink():
                shutil.copytree(source, target, symlinks=True)
            else:
                shutil.copy2(source, target, follow_symlinks=False)
        dropped = [link for name in spec.keep for link in _drop_links_out(staging, name)]
    finally:
        # --one-file-system: a debootstrap that died may have left /proc mounted in the tree.
        subprocess.run(["rm", "-rf", "--one-file-system", str(tree)], check=False)
    return {
        "kind": "debian",
        "package": spec.package,
        "version": spec.version,
        "suite": spec.suite,
        "mirror": mirror,
        "packages": [f"{name}={version}" for name, version in sorted(versions.items())],
        "dropped_links": dropped,
    }


def installed_versions(status: Path) -> dict[str, str]:
    """Package -> version of dpkg's status file (installed packages only)."""
    versions: dict[str, str] = {}
    for paragraph in status.read_text(errors="replace").split("\n\n"):
        fields = dict(re.findall(r"^([A-Za-z-]+): (.*)$", paragraph, flags=re.M))
        if "Package" in fields and fields.get("Status", "").endswith(" installed"):
            versions[fields["Package"]] = fields.get("Version", "")
    return versions


def _drop_links_out(top: Path, kept: str) -> list[str]:
    """Remove the links under ``top/kept`` that are absolute or climb out of ``top``: inside the
    sandbox they would name the image's files (``sitecustomize.py`` -> ``/etc/python3.X/``)."""
    dropped = []
    if (top / kept).is_symlink():
        walked: list = [(str((top / kept).parent), [], [(top / kept).name])]
    else:
        walked = list(os.walk(top / kept))
    for dirpath, dirnames, filenames in walked:
        for name in [*filenames, *dirnames]:
            path = Path(dirpath) / name
            if not path.is_symlink():
                continue
            target = os.readlink(path)
            resolved = os.path.normpath(os.path.join(dirpath, target))
            if target.startswith("/") or not resolved.startswith(str(top) + os.sep):
                path.unlink()
                dropped.append(str(path.relative_to(top)))
    return dropped


def build_site(definition: AgentDefinition, runtime: Path, staging: Path, run: Run) -> dict:
    """The definition's pinned PyPI packages in ``staging/site`` for the runtime's Python:
    wheels only (nothing is built), then compiled by that Python."""
    spec = definition.spec.install
    assert definition.spec.runtime is not None
    version = python_version(definition.spec.runtime)
    abi = "cp" + version.replace(".", "")
    platforms = [f"manylinux_2_{minor}_x86_64" for minor in range(MAX_GLIBC_MINOR, 4, -1)]
    platforms += ["manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"]
    site = staging / SITE
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-cache-dir",
            "--disable-pip-version-check",
            "-q",
            "--target",
            str(site),
            "--no-compile",
            "--only-binary=:all:",
            "--python-version",
            version,
            "--implementation",
            "cp",
            "--abi",
            abi,
            *(arg for platform in platforms for arg in ("--platform", platform)),
            *(["--no-deps"] if spec.no_deps else []),
            f"{spec.package}=={spec.version}",
            *spec.requirements,
        ],
        cwd=staging,
        timeout=1800,
        what=f"{definition.label}: pip install {spec.package}=={spec.version} for Python {version}",
    )
    python = python_argv(runtime, definition.spec.runtime)
    run(
        [*python, "-I", "-m", "compileall", "-q", "-j", "1", str(site)],
        cwd=staging,
        timeout=1800,
        what=f"{definition.label}: compile for Python {version}",
    )
    found = run(
        [
            *python,
            "-I",
            "-c",
            "import sys, importlib.metadata as m; sys.path[:0] = [sys.argv[1]]; "
            "print(sys.version.split()[0]); "
            "print('\\n'.join(sorted(f'{d.name}=={d.version}' "
            "for d in m.distributions(path=[sys.argv[1]]))))",
            str(site),
        ],
        cwd=staging,
        timeout=120,
        what=f"{definition.label}: list the packages",
    ).split()
    return {
        "kind": "pypi",
        "package": spec.package,
        "version": spec.version,
        "python": found[0] if found else "",
        "freeze": found[1:],
    }
