"""A CLI agent's attempt against the same CLI run bare, both against the same scripted upstream.

    python bench/cli_agents.py [--runs 3] [--clis claude-code,codex,mini-swe-agent]
                               [--backends docker,bwrap]

For each CLI: the agent stage of a real attempt on custom-dev's toy_fail_pytest (the CLI in the
sandbox with its install mounted read-only, its calls through the gateway; mini-swe-agent on
the worker with its commands in the sandbox) against the same CLI run directly on the host as
the sandbox's uid, in a fresh copy of the toy repository, talking to the upstream directly.
Both replay the same plan (read, run the tests, fix, finish: four model calls) from
tests/cli_upstream.py. Prints medians, the ratio and the load average. The installs must be
built (``ab agents --install all``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TOY_REPO = ROOT / "examples" / "toy_repo"
OLD = "    return total(values) // len(values)"
NEW = "    return total(values) / len(values)"
TEST = "PYTHONPATH=src python3 -m pytest -q tests/test_calc.py"
SANDBOX_UID = 64000


def setup_django(tmp: Path) -> None:
    os.environ.update(AB_VAR_DIR=str(tmp / "var"), ARTIFACTS_ROOT=str(tmp / "artifacts"))
    os.environ.pop("DATABASE_URL", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchsite.settings")
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
    from tests.cli_upstream import (
        REAL_KEY,
        UPSTREAM_KEY_ENV,
        ScriptedUpstream,
        cli_model_config,
        fix_plan,
    )

    os.environ[UPSTREAM_KEY_ENV] = REAL_KEY
    tasks_import(directory=ROOT / "tasks" / "custom-dev" / "toy_fail_pytest" / "task.yaml")
    task = Task.objects.get(task_id="toy_fail_pytest")
    plan = fix_plan(workdir="/workspace/repo", path="src/toy/calc.py", old=OLD, new=NEW,
                    test_command=TEST)  # fmt: skip
    with ScriptedUpstream(plan) as upstream:
        config = cli_model_config(cli, upstream, name=f"bench {cli}")
        attempt = attempt_execute(attempt_create_adhoc(task=task, model_config=config),
                                  backend=backend)  # fmt: skip
    if attempt.failure_reason_id is not None:
        raise SystemExit(f"{cli} on {backend}: {attempt.error_text}")
    return attempt.stages.get(name="agent_run").duration_sec or 0.0


def bare_seconds(cli: str) -> float:
    """The same CLI, same flags, straight to the upstream, on the host as the sandbox's uid."""
    from runs.agents.cli.definition import get_definition, render
    from runs.agents.cli.install import ensure_install
    from tests.cli_upstream import BASE_SUFFIX, MODEL, ScriptedUpstream, fix_plan

    definition = get_definition(cli)
    install = ensure_install(definition).path
    work = Path(tempfile.mkdtemp(prefix="ab-bench-cli-"))
    try:
        repo, home = work / "repo", work / "home"
        shutil.copytree(TOY_REPO, repo)
        home.mkdir()
        for folder in definition.spec.writable:
            (home / folder).mkdir(parents=True)
        subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
        subprocess.run(["chown", "-R", f"{SANDBOX_UID}:{SANDBOX_UID}", str(work)], check=True)
        work.chmod(0o755)
        plan = fix_plan(workdir=str(repo), path="src/toy/calc.py", old=OLD, new=NEW,
                        test_command=TEST)  # fmt: skip
        prompt = work / "prompt.txt"
        prompt.write_text(f"Fix the failing tests. Run them with: {TEST}")
        with ScriptedUpstream(plan) as upstream:
            values = {
                "install": str(install),
                "model": MODEL[cli],
                "max_turns": 20,
                "base_url": upstream.base_url + BASE_SUFFIX[cli],
                "token": "bench-key",
                "prompt_file": str(prompt),
                "prompt": prompt.read_text(),
                "workdir": str(repo),
                "home": str(home),
                "bridge": "",
            }
            argv = [render(t, values) for t in definition.spec.command]
            env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8"}
            env |= {k: render(v, values) for k, v in definition.spec.env.items()}
            if definition.spec.runs_in == "worker":  # mini-swe-agent: its local environment
                argv = [a for a in argv if not a.startswith("--environment-class")]
                env.pop("PYTHONPATH", None)
            with open(prompt if definition.spec.stdin else os.devnull) as stdin:
                started = time.monotonic()
                done = subprocess.run(
                    ["setpriv", "--reuid", str(SANDBOX_UID), "--regid", str(SANDBOX_UID),
                     "--clear-groups", *argv],
                    cwd=repo, env=env, stdin=stdin, capture_output=True, timeout=600,
                )  # fmt: skip
                seconds = time.monotonic() - started
        if done.returncode != 0 or NEW not in (repo / "src/toy/calc.py").read_text():
            raise SystemExit(f"bare {cli}: exit {done.returncode}\n{done.stderr.decode()[-2000:]}")
        return seconds
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--clis", default="claude-code,codex,mini-swe-agent")
    parser.add_argument("--backends", default="docker,bwrap")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="ab-bench-clis-"))
    setup_django(tmp)
    rows = []
    for cli in args.clis.split(","):
        bare = []
        attempts: dict[str, list[float]] = {b: [] for b in args.backends.split(",")}
        for _ in range(args.runs):  # alternating, so a load spike hits both sides
            bare.append(bare_seconds(cli))
            for backend in attempts:
                attempts[backend].append(attempt_seconds(cli, backend))
        for backend, values in attempts.items():
            b, a = statistics.median(bare), statistics.median(values)
            rows.append((cli, backend, a, b, a / b))
    print(f"{'cli':16} {'backend':8} {'attempt s':>10} {'bare s':>8} {'ratio':>6}")
    for cli, backend, a, b, ratio in rows:
        print(f"{cli:16} {backend:8} {a:10.2f} {b:8.2f} {ratio:6.2f}x")
    print(f"median of {args.runs}; load average {os.getloadavg()[0]:.2f}")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
