"""Root filesystem trees for the offline SWE-bench levels, and commands run inside them.

A level's tree starts as a hard-link copy of the level below (``cp -al``: no extra space), so
the build steps must never write into a file they did not create: new files, renames and
unlinks are safe, writing into an existing file would change the lower level too. The steps
here keep to that: the venv of an instance is a real copy (``pip install -e`` may rewrite a
``.pth`` file in place), and the host files a build needs (DNS, CA bundle, pip cache) are bind
mounted, never copied in.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

PATH_ENV = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
HOST_CA = Path("/etc/ssl/certs/ca-certificates.crt")
# Where the host's CA bundle appears inside a build: pip on this machine reaches PyPI through
# an intercepting proxy whose certificate only the host bundle holds.
CA_IN_TREE = "/etc/ssl/agentbench-host-ca.crt"
AGENT_UID = 1000


class BuildStepError(RuntimeError):
    """A build command failed; ``log`` is its output (the tail is shown to the user)."""

    def __init__(self, message: str, log: str = ""):
        super().__init__(message)
        self.log = log


@contextmanager
def staging(final: Path) -> Iterator[Path]:
    """A work folder beside ``final`` renamed to it when the block succeeds (never a half
    tree at ``final``), removed when it fails. Call it holding the level's lock."""
    final.parent.mkdir(parents=True, exist_ok=True)
    # The caller holds the level's lock: a work folder left by a killed build is garbage.
    for stale in final.parent.glob(f".{final.name}.*"):
        subprocess.run(["rm", "-rf", "--one-file-system", str(stale)], check=False)
    work = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    try:
        yield work
        work.chmod(0o755)
        work.rename(final)
    finally:
        if work.exists():
            subprocess.run(["rm", "-rf", "--one-file-system", str(work)], check=False)


def hardlink_copy(src: Path, dest: Path) -> None:
    """``dest`` becomes a copy of ``src`` sharing every file's data (``dest`` must be empty)."""
    dest.rmdir()
    run(["cp", "-al", str(src), str(dest)], what=f"hard-link copy of {src}")


def real_copy(src: Path, dest: Path) -> None:
    """Replace ``dest`` (a hard-link copy) with a copy of its own of ``src``."""
    if dest.exists():
        shutil.rmtree(dest)
    run(["cp", "-a", str(src), str(dest)], what=f"copy of {src}")


def debootstrap(tree: Path, suite: str, packages: str, mirror: str, *, log: Path) -> None:
    with open(log, "w") as out:
        done = subprocess.run(
            ["debootstrap", "--variant=minbase", f"--include={packages}", suite, str(tree), mirror],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    if done.returncode != 0:
        raise BuildStepError(f"debootstrap {suite} failed", log.read_text(errors="replace"))


def run_in_tree(
    tree: Path,
    script: str,
    *,
    cwd: str = "/",
    env: dict[str, str] | None = None,
    pip_cache: Path | None = None,
    timeout: float = 3600,
    what: str = "build step",
) -> str:
    """Run ``script`` (bash, ``set -euxo pipefail`` like the official setup scripts) as root
    in ``tree`` with the host's network, DNS and CA bundle. Returns its output; raises
    BuildStepError with it when the script fails."""
    args = [
        "bwrap",
        "--bind",
        str(tree),
        "/",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--tmpfs",
        "/tmp",
        "--ro-bind",
        "/etc/resolv.conf",
        "/etc/resolv.conf",
        "--ro-bind",
        str(HOST_CA),
        CA_IN_TREE,
        "--die-with-parent",
        "--unshare-pid",
        "--chdir",
        cwd,
        "--clearenv",
    ]
    if pip_cache is not None:
        pip_cache.mkdir(parents=True, exist_ok=True)
        args += ["--bind", str(pip_cache), "/root/.cache/pip"]
    full_env = {
        "PATH": PATH_ENV,
        "HOME": "/root",
        "LANG": "C.UTF-8",
        "DEBIAN_FRONTEND": "noninteractive",
        "PIP_CERT": CA_IN_TREE,
        "REQUESTS_CA_BUNDLE": CA_IN_TREE,
        "SSL_CERT_FILE": CA_IN_TREE,
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PIP_PROGRESS_BAR": "off",
        **(env or {}),
    }
    for key, value in full_env.items():
        args += ["--setenv", key, value]
    args += ["bash", "-c", "set -euxo pipefail\n" + script]
    try:
        done = subprocess.run(
            args, capture_output=True, text=True, errors="replace", timeout=timeout
        )
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or "") if isinstance(exc.stdout, str) else ""
        raise BuildStepError(f"{what} took longer than {timeout:.0f}s", out) from exc
    finally:
        _remove_mount_points(tree, pip_cache is not None)
    output = done.stdout + done.stderr
    if done.returncode != 0:
        raise BuildStepError(f"{what} failed (exit {done.returncode})", output)
    return output


def _remove_mount_points(tree: Path, pip_cache: bool) -> None:
    # bwrap created these empty mount points in the tree; they are not part of the level.
    ca = tree / CA_IN_TREE.lstrip("/")
    if ca.exists() and ca.stat().st_size == 0:
        ca.unlink()
    if pip_cache:
        cache = tree / "root/.cache/pip"
        if cache.is_dir() and not any(cache.iterdir()):
            cache.rmdir()
            parent = cache.parent
            if not any(parent.iterdir()):
                parent.rmdir()


def tree_size(tree: Path) -> int:
    """Bytes of ``tree`` counting each inode once (du -s)."""
    done = subprocess.run(["du", "-sb", str(tree)], capture_output=True, text=True)
    return int(done.stdout.split()[0]) if done.returncode == 0 else 0


def run(cmd: list[str], *, what: str) -> None:
    """Run ``cmd`` on the host; BuildStepError naming ``what`` when it fails."""
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise BuildStepError(f"{what} failed: {done.stderr.strip()[-500:]}", done.stderr)


def host_git(*args: str, cwd: Path) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise BuildStepError(f"git {' '.join(args)} failed: {done.stderr.strip()}", done.stderr)
    return done.stdout


def checkout_testbed(tree: Path, bare: Path, commit: str, path: str, *, tag: str) -> None:
    """``path`` in ``tree`` becomes a repository holding only ``commit``, checked out: no
    remote, no other commit of the archive (another instance's base could be this one's
    future), and one tag ``tag`` on it.

    The tag stands in for the release tags of the official clone, which the one-commit archive
    lacks: setuptools_scm and versioneer derive the package version from it (with no tag
    pvlib installs as 0.1.dev1 and pvfactors, needing pvlib>=0.6, cannot be resolved)."""
    testbed = tree / path.lstrip("/")
    testbed.mkdir(parents=True)
    host_git("init", "-q", cwd=testbed)
    host_git("fetch", "-q", "--depth=1", "--no-tags", str(bare), commit, cwd=testbed)
    host_git("checkout", "-q", "--detach", commit, cwd=testbed)
    host_git("tag", tag, commit, cwd=testbed)
    host_git("reflog", "expire", "--expire=now", "--all", cwd=testbed)
