"""The attempt's working copy on the host: clone, checkout, status, diff. Git only, no Django.

Every git command runs with hooks, templates, fsmonitor and prompts disabled and without the
user's or the system's git config, so nothing shipped in a cloned repository runs on the host.

Once sandboxed code has run, the repository's ``.git`` is its to write: a ``filter.*.clean``
or ``diff.*.textconv`` command in ``.git/config`` (with a ``.gitattributes`` naming it) would
run on the host, as root, the moment the harness ran ``git add`` or ``git diff`` there, and
``core.worktree`` or a ``.git`` file would point git at host files. So the commands that read
the working tree afterwards (``changed_paths``, ``diff_against``) never use that ``.git``: they
run with a throwaway git folder of the harness (empty config, no hooks, its own index) that
only borrows the repository's objects.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from sandbox.base import TIMEOUT_EXIT_CODE

# Caches written by the test runs and by agent tools: never part of an agent's patch or a
# "dirty" tree.
CACHE_EXCLUDES = (
    ":(exclude,glob)**/__pycache__/**",
    ":(exclude,glob)**/*.pyc",
    ":(exclude,glob)**/.pytest_cache/**",
    # aider's repo-map cache (a SQLite folder it keeps at the repository's root; no option
    # moves it): its index of the code, not a change to it.
    ":(exclude,glob).aider.tags.cache.v*/**",
)

_GIT_CONFIG = (
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.autocrlf=false",
    "-c",
    "safe.directory=*",
    "-c",
    "protocol.ext.allow=never",
    "-c",
    "submodule.recurse=false",
    "-c",
    "advice.detachedHead=false",
    "-c",
    "user.name=AgentBench",
    "-c",
    "user.email=harness@agentbench.invalid",
)


@dataclass(frozen=True, slots=True)
class HostResult:
    """One command run on the host, shaped like a sandbox ExecResult for the stage logs."""

    command: str
    exit_code: int
    stdout: str
    stderr: str
    duration_sec: float
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


def git_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        GIT_TERMINAL_PROMPT="0",
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL="/dev/null",
        GIT_SSH_COMMAND="ssh -o BatchMode=yes",
        GIT_ASKPASS="/bin/false",
        LC_ALL="C",
    )
    return env


def run_host(
    argv: Sequence[str],
    *,
    timeout: float,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    stdin: str | None = None,
) -> HostResult:
    """Run a command on the host; on timeout kill its whole process group and report 124."""
    started = time.monotonic()
    proc = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=env,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
        errors="replace",
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(stdin, timeout=timeout)
        code, timed_out = proc.returncode, False
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err = proc.communicate()
        err = (err or "") + f"\n[timeout] killed after {timeout:.0f}s\n"
        code, timed_out = TIMEOUT_EXIT_CODE, True
    except BaseException:
        _kill_group(proc)
        proc.wait()
        raise
    return HostResult(
        command=" ".join(_quote(a) for a in argv),
        exit_code=code,
        stdout=out or "",
        stderr=err or "",
        duration_sec=time.monotonic() - started,
        timed_out=timed_out,
    )


def git(
    repo: Path | None,
    *args: str,
    timeout: float = 60,
    env: dict[str, str] | None = None,
    stdin: str | None = None,
) -> HostResult:
    base = ["git", *_GIT_CONFIG]
    if repo is not None:
        base += ["-C", str(repo)]
    result = run_host([*base, *args], timeout=timeout, env=env or git_env(), stdin=stdin)
    # The logs show the command as a person would type it, without the safety flags.
    return replace(result, command=" ".join(["git", *(_quote(a) for a in args)]))


def clone(url: str, dest: Path, *, timeout: float) -> HostResult:
    """Clone ``url`` (remote URL, local path, git bundle or file:// URL) without checking out.

    No hard links to a local source, so nothing done to the copy can reach the original.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    return git(
        None,
        "clone",
        "--quiet",
        "--no-checkout",
        "--no-hardlinks",
        "--template=",
        "--",
        url,
        str(dest),
        timeout=timeout,
    )


def checkout(repo: Path, commit: str, *, timeout: float) -> HostResult:
    """Check out ``commit`` detached; fetch it first when no branch of the clone reaches it."""
    started = time.monotonic()
    notes = []
    probe = git(repo, "cat-file", "-e", f"{commit}^{{commit}}", timeout=timeout)
    if not probe.ok and re.fullmatch(r"[0-9a-fA-F]{7,64}", commit):
        fetched = git(repo, "fetch", "--quiet", "origin", commit, timeout=timeout)
        notes.append(fetched.stderr)
        if fetched.timed_out:
            return fetched
    result = git(repo, "checkout", "--quiet", "--detach", commit, "--", timeout=timeout)
    if result.ok:
        # A plain commit-ish check, so a tag or branch name cannot silently mean something else.
        resolved = git(repo, "rev-parse", "HEAD", timeout=timeout)
        notes.append(f"HEAD is {resolved.stdout.strip()}\n")
    return HostResult(
        command=f"git checkout --detach {commit}",
        exit_code=result.exit_code,
        stdout=result.stdout,
        stderr="".join(notes) + result.stderr,
        duration_sec=time.monotonic() - started,
        timed_out=result.timed_out,
    )


def head_commit(repo: Path, *, timeout: float = 60) -> str:
    """The id of the commit checked out in ``repo`` ("" when there is none)."""
    resolved = git(repo, "rev-parse", "--verify", "--quiet", "HEAD^{commit}", timeout=timeout)
    return resolved.stdout.strip() if resolved.ok else ""


def excludes_for(repo: Path, harness_dirs: Sequence[Path]) -> list[str]:
    """Pathspecs that leave out caches and harness-owned folders that sit inside the repo."""
    specs = list(CACHE_EXCLUDES)
    for folder in harness_dirs:
        try:
            rel = folder.resolve().relative_to(repo.resolve())
        except ValueError:
            continue
        specs.append(f":(exclude){rel.as_posix()}")
    return specs


@contextlib.contextmanager
def _harness_git(repo: Path) -> Iterator[dict[str, str]]:
    """Environment for git on ``repo``'s working tree after sandboxed code wrote it (see the
    module docstring): a git folder of our own whose objects fall back on the repository's
    (alternates: data only, never configuration or commands)."""
    with tempfile.TemporaryDirectory(prefix="ab-git-") as tmp:
        git_dir = Path(tmp) / "git"
        made = git(None, "init", "--quiet", "--bare", "--template=", str(git_dir), timeout=60)
        if not made.ok:
            raise OSError(f"git init {git_dir}: {made.stderr.strip()}")
        alternates = git_dir / "objects" / "info" / "alternates"
        alternates.parent.mkdir(parents=True, exist_ok=True)
        alternates.write_text(f"{repo.resolve() / '.git' / 'objects'}\n")
        yield git_env() | {
            "GIT_DIR": str(git_dir),
            "GIT_WORK_TREE": str(repo),
            "GIT_INDEX_FILE": str(Path(tmp) / "index"),
        }


def _stage_all(
    repo: Path, commit: str, env: dict[str, str], excludes: Sequence[str], timeout: float
) -> HostResult | None:
    """Our index holds ``commit`` and then the whole working tree; a failed step's result."""
    for args in (("read-tree", commit), ("add", "--all", "--", ".", *excludes)):
        step = git(repo, *args, timeout=timeout, env=env)
        if not step.ok:
            return step
    return None


def changed_paths(
    repo: Path, commit: str, *, excludes: Sequence[str], timeout: float = 60
) -> HostResult:
    """The paths of the working tree that differ from ``commit`` (new files included), one a
    line; the repository's own .git is not read (see the module docstring)."""
    with _harness_git(repo) as env:
        failed = _stage_all(repo, commit, env, excludes, timeout)
        if failed is not None:
            return failed
        return git(
            repo,
            "diff",
            "--cached",
            "--name-only",
            "--no-renames",
            commit,
            "--",
            ".",
            *excludes,
            timeout=timeout,
            env=env,
        )


def diff_against(
    repo: Path, commit: str, *, excludes: Sequence[str], timeout: float = 120
) -> HostResult:
    """The working tree (new files included) as a patch against ``commit``.

    Uses an index and a git folder of the harness, so the repository's own index (which the
    agent may have used) stays as it was and its .git is never read (see the module docstring).
    """
    with _harness_git(repo) as env:
        failed = _stage_all(repo, commit, env, excludes, timeout)
        if failed is not None:
            return failed
        return git(
            repo,
            "diff",
            "--cached",
            "--binary",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            commit,
            "--",
            ".",
            *excludes,
            timeout=timeout,
            env=env,
        )


def apply_patch(repo: Path, patch: str, *, timeout: float = 60) -> HostResult:
    """``git apply`` a patch to the working tree (the repository's index is not touched)."""
    if patch and not patch.endswith("\n"):
        patch += "\n"
    return git(repo, "apply", "--whitespace=nowarn", "-", timeout=timeout, stdin=patch)


@dataclass(frozen=True, slots=True)
class PatchStats:
    lines_changed: int
    files_touched: list[str]


_DIFF_HEADER = re.compile(r"^diff --git a/(.+?) b/(.+)$")


def patch_stats(patch: str) -> PatchStats:
    """Added plus removed lines, and the files a unified git diff touches (in order).

    One pass, linear in the patch: the files seen are a dict (ordered), not a list searched
    for each header, which made 200,000 new files of a sandbox cost the host ten minutes."""
    files: dict[str, None] = {}
    changed = 0
    for line in patch.splitlines():
        header = _DIFF_HEADER.match(line) if line.startswith("diff --git ") else None
        if header:
            files.setdefault(header.group(2))
            continue
        if line.startswith(("+++", "---")):
            continue
        if line.startswith(("+", "-")):
            changed += 1
    return PatchStats(lines_changed=changed, files_touched=list(files))


def _kill_group(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def _quote(arg: str) -> str:
    return arg if re.fullmatch(r"[\w@%+=:,./\-^{}]+", arg) else repr(arg)
