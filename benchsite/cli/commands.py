"""The table of ``ab`` commands: name -> (module that registers it, help line, needs the database).

``ab`` builds its parser from this table so that ``ab --help`` imports no command module and a
command imports only its own module. tests/benchsite/cli/test_cli_startup.py checks the table
against what the modules register, so a new command added to a module without a row here fails a
test.
"""

from __future__ import annotations

from typing import NamedTuple


class Command(NamedTuple):
    module: str
    help: str
    needs_db: bool = True  # False: Django is not set up and migrations are not checked


COMMANDS: dict[str, Command] = {
    "serve": Command(
        "benchsite.cli.app",
        "run the web app (gunicorn), a local worker and the reaper on 127.0.0.1:8000",
    ),
    "setup-demo": Command(
        "benchsite.cli.app",
        "migrate, import the example tasks and SWE-bench sample, seed demo runs, and "
        "create an admin login",
    ),
    "add-reader": Command(
        "benchsite.cli.app",
        "let an account read patches, logs and transcripts (the readers group)",
    ),
    "list-tasks": Command(
        "tasks_app.cli.tasks",
        "list the task ids of a suite in a tasks folder",
        needs_db=False,
    ),
    "check-tasks": Command(
        "tasks_app.cli.tasks",
        "validate task.yaml files and Harbor task folders; exit 1 with one line each",
        needs_db=False,
    ),
    "import-tasks": Command(
        "tasks_app.cli.tasks",
        "import (or update) every task.yaml and Harbor task folder under a folder",
    ),
    "build-environments": Command(
        "tasks_app.cli.harbor",
        "build (or find built) the Dockerfile environments of a suite's Harbor tasks",
    ),
    "pull-images": Command(
        "tasks_app.cli.images",
        "pull the images a suite's tasks name (progress, retries, mirrors, disk budget)",
    ),
    "import-swebench": Command(
        "tasks_app.cli.swebench_dataset",
        "import (or update) a SWE-bench dataset file (.jsonl, .json list, .parquet)",
    ),
    "import-predictions": Command(
        "runs.imports.cli",
        "create a run evaluating predictions (instance_id, model_patch) on a suite",
    ),
    "import-results": Command(
        "runs.imports.cli",
        "import published results (a run report, report.json files, or a folder of them)",
    ),
    "import-run": Command(
        "runs.imports.cli",
        "import a run folder: trajectories (mini-swe-agent, SWE-agent), reports, "
        "predictions, legacy reports, Inspect .eval logs",
    ),
    "export-run": Command(
        "runs.bundles.cli",
        "export a run: a reproducibility bundle (.tar.gz) or the SWE-bench experiments layout",
    ),
    "swebench": Command(
        "tasks_app.cli.swebench_build",
        "SWE-bench instances offline: build their environments, the cache's disk use (du, prune)",
    ),
    "environments": Command(
        "tasks_app.cli.swebench_cache",
        "every cached environment, whatever its source: disk use (du) and pruning (prune)",
        needs_db=False,
    ),
    "run-suite": Command(
        "runs.cli.runs",
        "launch a run: the tasks of a suite x one model configuration x k",
    ),
    "cancel-run": Command(
        "runs.cli.runs",
        "cancel a run: queued attempts end, running ones stop",
    ),
    "retry-run": Command(
        "runs.cli.runs",
        "retry the attempts of a run that ended for infrastructure",
    ),
    "resume-run": Command(
        "runs.cli.runs",
        "re-send the messages of a run's queued attempts",
    ),
    "evaluate-run": Command(
        "runs.cli.runs",
        "queue the not-evaluated attempts of a run",
    ),
    "leaderboard": Command(
        "runs.cli.results",
        "a suite's leaderboard: the leaderboard page's rows and figures",
    ),
    "flags": Command(
        "runs.cli.flags",
        "integrity flags: recompute them for attempts checked under older rules (--all)",
    ),
    "search": Command(
        "runs.search.cli",
        "search every transcript (messages, tool calls, outputs); `reindex` rebuilds",
    ),
    "worker": Command(
        "runs.cli.worker",
        "start a Celery worker that runs attempts",
    ),
    "reaper": Command(
        "runs.cli.worker",
        "requeue or end attempts whose worker went silent (a loop; --once)",
    ),
    "run-task": Command(
        "runs.cli.pipeline",
        "import a task.yaml and run its clone, setup and baseline tests in a sandbox",
    ),
    "validate-suite": Command(
        "runs.cli.pipeline",
        "check that every task of a suite has a failing baseline",
    ),
    "doctor": Command(
        "runs.cli.pipeline",
        "check the Docker engine, runner image, network isolation, bubblewrap, smoke task",
    ),
    "run-agent": Command(
        "runs.cli.agents",
        "run an agent (scripted, oracle, nop or an LLM) on one task and record the attempt",
    ),
    "agents": Command(
        "runs.cli.agents",
        "list the agent variants and agent CLI definitions (shipped and added)",
    ),
}
