"""A CLI agent's attempt against the same CLI run bare, both against the same scripted upstream.

    python bench/cli_agents.py [--runs 3] [--clis claude-code,codex,...] (default: every CLI)
                               [--backends docker,bwrap]

(``bench/gateway.py`` runs this too, after the gateway's latency.) For each CLI: the agent stage
of a real attempt on custom-dev's toy_fail_pytest (the CLI in the sandbox with its install
mounted read-only, its calls through the gateway; mini-swe-agent on the worker with its
commands in the sandbox) against the same CLI doing the same work bare (``bare_seconds``: the
same repository, flags and test command, a python with pytest, no gateway or sandbox layers),
talking to the upstream directly. Both replay the same plan (read, run the tests, fix, finish:
four model calls) from tests/support/fake_provider_plans.py, and both are checked to have run the
tests and fixed the file. Prints medians, each run, the ratio and the load average. The installs are
built on first use (``ab agents --install all``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TOY_REPO = ROOT / "examples" / "toy_repo"
OLD = "    return total(values) // len(values)"
NEW = "    return total(values) / len(values)"
TEST = "PYTHONPATH=src python3 -m pytest -q tests/test_calc.py"
# CLIs without tools (aider): the plan's edit comes as text in the first answer; no tests run.
EDITS_IN_TEXT = {
    "aider",
}
WORKDIR = "/workspace/repo"


def setup_django(tmp: Path) -> None:
    os.environ.update(AB_VAR_DIR=str(tmp / "var"), ARTIFACTS_ROOT=str(tmp / "artifacts"))
    os.environ.pop("DATABASE_URL", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchsite.settings")
    from runs.upstreams import DEFAULT_KEY_ENVS
    from tests.support.fake_provider_plans import UPSTREAM_KEY_ENV

    # The scripted upstream's key variable is on the list, as an operator lists theirs.
    os.environ["GATEWAY_API_KEY_ENVS"] = ",".join([*DEFAULT_KEY_ENVS, UPSTREAM_KEY_ENV])
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def attempt_seconds(cli: str, backend: str) -> float:
    """The agent stage of one pipeline attempt (the CLI from start to exit, gateway open)."""
    from runs.pipeline.adhoc import attempt_create_adhoc
    from runs.pipeline.execute import attempt_execute
    from tasks_app.models import Task
    from tasks_app.services import tasks_import
    from tests.support.fake_provider_plans import (
        REAL_KEY,
        UPSTREAM_KEY_ENV,
        cli_model_config,
        fix_plan,
        plan_provider,
    )

    os.environ[UPSTREAM_KEY_ENV] = REAL_KEY
    tasks_import(directory=ROOT / "tasks" / "custom-dev" / "toy_fail_pytest" / "task.yaml")
    task = Task.objects.get(task_id="toy_fail_pytest")
    plan = fix_plan(
        workdir="/workspace/repo", path="src/toy/calc.py", old=OLD, new=NEW, test_command=TEST
    )
    with plan_provider(plan) as upstream:
        config = cli_model_config(cli, upstream, name=f"bench {cli}")
        attempt = attempt_execute(
            attempt_create_adhoc(task=task, model_config=config), backend=backend
        )
    if attempt.failure_reason_id is not None:
        raise SystemExit(f"{cli} on {backend}: {attempt.error_text}")
    return attempt.stages.get(name="agent_run").duration_sec or 0.0


def bare_seconds(cli: str) -> float:
    """The same CLI, same flags and plan, straight to the upstream, without our pipeline: no
    gateway, exec server, network namespace, accounts, quota or exposure. A CLI that runs in
    the sandbox runs in a bare bubblewrap over the same runner rootfs (so its test command finds
    the same python with pytest), as the sandbox's uid, its install read-only where the
    attempt mounts it, the same repository at /workspace/repo, the host's network; one that runs
    on the worker (mini-swe-agent) runs on the host as the worker does, with its local
    environment and a venv with pytest (this checkout's) first on PATH."""
    from runs.agents.cli.agent import MOUNT_ROOT, PROMPT_PATH, SANDBOX_HOME
    from runs.agents.cli.definition import get_definition, render
    from runs.agents.cli.install import ensure_install
    from sandbox.bwrap_backend import default_rootfs
    from tests.support.fake_provider_plans import (
        BASE_SUFFIX,
        MODEL,
        WIRE_PATH,
        fix_plan,
        plan_provider,
    )

    definition = get_definition(cli)
    install = ensure_install(definition).path
    runtime_part = definition.runtime_part()
    runtime = ensure_install(runtime_part).path if runtime_part is not None else None
    in_sandbox = definition.spec.runs_in == "sandbox"
    work = Path(tempfile.mkdtemp(prefix="ab-bench-cli-"))
    try:
        repo, home, tmp = work / "workspace" / "repo", work / "home", work / "tmp"
        shutil.copytree(TOY_REPO, repo)
        home.mkdir()
        tmp.mkdir()
        for folder in definition.spec.writable:
            (home / folder).mkdir(parents=True)
        for name, text in definition.spec.home_files.items():  # its settings, as an attempt's
            (home / name).parent.mkdir(parents=True, exist_ok=True)
            (home / name).write_text(text)
        git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@localhost"]
        subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
        subprocess.run([*git, "add", "-A"], cwd=repo, check=True)
        subprocess.run([*git, "commit", "-qm", "task"], cwd=repo, check=True)
        prompt = work / "prompt.txt"
        prompt.write_text(f"Fix the failing tests. Run them with: {TEST}")
        if in_sandbox:  # where {prompt_file} names it (aider's --message-file), as in an attempt
            (tmp / Path(PROMPT_PATH).name).write_text(prompt.read_text())
        workdir = WORKDIR if in_sandbox else str(repo)
        plan = fix_plan(
            workdir=workdir, path="src/toy/calc.py", old=OLD, new=NEW, test_command=TEST
        )
        with plan_provider(plan) as upstream:
            values = {
                "install": f"{MOUNT_ROOT}/{definition.install_dir_name}"
                if in_sandbox
                else str(install),
                "runtime": ""
                if runtime is None or runtime_part is None
                else f"{MOUNT_ROOT}/{runtime_part.install_dir_name}"
                if in_sandbox
                else str(runtime),
                "model": MODEL[cli],
                "max_turns": 20,
                "base_url": upstream.url(BASE_SUFFIX[cli]),
                "token": "bench-key",
                "prompt_file": PROMPT_PATH if in_sandbox else str(prompt),
                "prompt": prompt.read_text(),
                "workdir": workdir,
                "home": SANDBOX_HOME if in_sandbox else str(home),
                "bridge": "",
            }
            argv = [render(t, values) for t in definition.spec.command]
            env = {
                "PATH": "/usr/local/bin:/usr/bin:/bin",
                "HOME": values["home"],
                "LANG": "C.UTF-8",
            }
            env |= {k: render(v, values) for k, v in definition.spec.env.items()}
            if in_sandbox:
                argv = _bare_bwrap(
                    argv,
                    env,
                    repo=repo,
                    home=home,
                    tmp=tmp,
                    mounts={install: values["install"]}
                    | ({runtime: values["runtime"]} if runtime is not None else {}),
                    rootfs=default_rootfs(),
                )
                cwd = work
            else:  # mini-swe-agent, as the worker's user (as in an attempt): its local
                # environment, a python with pytest first on PATH
                argv = [a for a in argv if not a.startswith("--environment-class")]
                env.pop("PYTHONPATH", None)
                env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"
                cwd = repo
            with open(prompt if definition.spec.stdin else os.devnull) as stdin:
                started = time.monotonic()
                done = subprocess.run(
                    argv, cwd=cwd, env=env, stdin=stdin, capture_output=True, timeout=600
                )
                seconds = time.monotonic() - started
        sent = json.dumps([r.json for r in upstream.requests_to(WIRE_PATH[cli])])
        if done.returncode != 0 or NEW not in (repo / "src/toy/calc.py").read_text():
            raise SystemExit(f"bare {cli}: exit {done.returncode}\n{done.stderr.decode()[-2000:]}")
        if cli in EDITS_IN_TEXT:
            return seconds  # it runs no command: its edit is in its answer's text
        if "passed" not in sent or "No module named pytest" in sent:
            # The test command's output goes back to the model: the tests must have run.
            raise SystemExit(f"bare {cli}: the tests never ran (what it sent: {sent[-2000:]})")
        return seconds
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _bare_bwrap(
    argv: list[str],
    env: dict[str, str],
    *,
    repo: Path,
    home: Path,
    tmp: Path,
    mounts: dict[Path, str],
    rootfs: Path,
) -> list[str]:
    """``argv`` in bubblewrap over the runner rootfs as the sandbox's uid, with the host's
    network (the upstream on its loopback) and none of the harness's other layers; ``mounts``:
    the install (and its runtime) read-only where the attempt mounts them."""
    from runs.agents.cli.agent import SANDBOX_HOME
    from sandbox.base import AGENT_UID

    args = [
        "bwrap",
        "--unshare-user",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--die-with-parent",
        "--uid",
        str(AGENT_UID),
        "--gid",
        str(AGENT_UID),
        "--ro-bind",
        str(rootfs),
        "/",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--bind",
        str(tmp),
        "/tmp",
        "--bind",
        str(home),
        SANDBOX_HOME,
        "--bind",
        str(repo.parent),
        str(Path(WORKDIR).parent),
        "--tmpfs",
        "/mnt",
    ]
    for source, target in mounts.items():
        args += ["--ro-bind", str(source.resolve()), target]
    args += [
        "--chdir",
        WORKDIR,
        "--clearenv",
    ]
    for key, value in env.items():
        args += ["--setenv", key, value]
    return [*args, "--", *argv]


@dataclass(frozen=True)
class CliRow:
    cli: str
    backend: str
    attempt_s: list[float]  # the agent stage of each attempt
    bare_s: list[float]  # each bare run, alternating with them

    @property
    def ratio(self) -> float:
        return statistics.median(self.attempt_s) / statistics.median(self.bare_s)


def cli_rows(runs: int, clis: list[str], backends: list[str]) -> list[CliRow]:
    """``runs`` rounds per CLI, each a bare run then an attempt on every backend (alternating,
    so a load spike hits both sides); needs ``setup_django`` first."""
    rows = []
    for cli in clis:
        bare: list[float] = []
        attempts: dict[str, list[float]] = {b: [] for b in backends}
        for _ in range(runs):
            bare.append(bare_seconds(cli))
            for backend in attempts:
                attempts[backend].append(attempt_seconds(cli, backend))
        rows += [CliRow(cli, backend, values, bare) for backend, values in attempts.items()]
    return rows


def print_cli_rows(rows: list[CliRow]) -> None:
    print(
        f"{'cli':16} {'backend':8} {'attempt s (median)':>19} {'bare s (median)':>16} "
        f"{'ratio':>6}   each attempt / bare"
    )
    for row in rows:
        each = " ".join(f"{a:.1f}" for a in row.attempt_s) + " / "
        each += " ".join(f"{b:.1f}" for b in row.bare_s)
        print(
            f"{row.cli:16} {row.backend:8} {statistics.median(row.attempt_s):19.2f} "
            f"{statistics.median(row.bare_s):16.2f} {row.ratio:5.2f}x   {each}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--clis", default="", help="comma-separated; default: every shipped CLI")
    parser.add_argument("--backends", default="docker,bwrap")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="ab-bench-clis-"))
    try:
        setup_django(tmp)
        load_before = os.getloadavg()
        from runs.agents.cli.definition import load_definitions

        clis = args.clis.split(",") if args.clis else list(load_definitions())
        rows = cli_rows(args.runs, clis, args.backends.split(","))
        print_cli_rows(rows)
        print(
            f"median of {args.runs}; load average {load_before[0]:.2f} before, "
            f"{os.getloadavg()[0]:.2f} after ({os.cpu_count()} cores)"
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
