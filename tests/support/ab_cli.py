"""The one way tests run ``ab``: in-process where nothing needs a separate process, else as the
real console entry point in a process of its own.

- ``ab_main(*args)``: the CLI's ``main`` in this process, on the test's database and settings,
  its stdout, stderr and exit code captured (argparse's exits included). Fast: no interpreter,
  Django start or migrations per call. The test needs the ``db`` fixture for a command that
  touches the database.
- ``ab(*args, var_dir=...)``: ``python -m benchsite.cli.main`` in a child process on a fresh
  database of its own under ``var_dir`` (settings are read once per process, so another
  database, broker or environment needs another process), or with the exact environment
  ``env_exact`` a stack of real services gives it (tests/support/worker_stack.py).

Both answer with ``returncode``, ``stdout`` and ``stderr``, so a test reads the same either way.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Finished:
    """What an in-process ``ab`` left: the same fields as ``subprocess.CompletedProcess``."""

    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str


def ab_main(*args: str) -> Finished:
    """``ab ARGS`` through the CLI's ``main`` in this process, output captured."""
    from benchsite.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exc:  # argparse: --help, a bad argument
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    return Finished(args, code, out.getvalue(), err.getvalue())


def ab_env(var_dir: Path, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of an ``ab`` process of its own under ``var_dir`` (for a long-lived one,
    e.g. ``ab worker``, started by the test itself)."""
    own = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "CELERY_"))}
    return own | {"AB_VAR_DIR": str(var_dir)} | dict(env or {})


def ab(
    *args: str,
    var_dir: Path | None = None,
    env: Mapping[str, str] | None = None,
    env_exact: Mapping[str, str] | None = None,
    timeout: float = 300,
    check: bool = False,
) -> subprocess.CompletedProcess:
    """``ab ARGS`` as the real console entry point in a child process.

    ``var_dir``: the process's own folder (database, broker, artifacts unless ``env`` names
    them), this environment's database and Celery settings left out; ``env``: variables added.
    ``env_exact``: the whole environment as given instead. ``check``: fail the test on a
    non-zero exit, with the command's stderr."""
    if env_exact is not None:
        environment = dict(env_exact) | dict(env or {})
    else:
        # Without a folder of its own the child would share the checkout's var/ database.
        assert var_dir is not None, "ab(): name var_dir (or env_exact)"
        environment = ab_env(var_dir, env)
    out = subprocess.run(
        [sys.executable, "-m", "benchsite.cli.main", *args],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env=environment,
        timeout=timeout,
    )
    if check and out.returncode != 0:
        raise AssertionError(f"ab {' '.join(args)} exited {out.returncode}:\n{out.stderr}")
    return out
