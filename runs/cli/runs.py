"""``ab`` commands that launch and steer runs: run-suite, cancel-run, retry-run, resume-run
(``ab worker`` is in runs.cli.worker)."""

from __future__ import annotations

import argparse
import time
import uuid
from pathlib import Path

from django.conf import settings

from benchsite.accounts.models import Door
from benchsite.cli.main import CommandError
from benchsite.processes import Supervisor
from runs import actions
from runs.cli.worker import LocalWorker
from runs.model_configs import generated_name
from runs.models import AgentVariant, ModelConfig, Run
from runs.taxonomy import Reason


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run-suite", help="launch a run: the tasks of a suite x one model configuration x k"
    )
    p.add_argument("suite")
    p.add_argument(
        "--variant",
        required=True,
        choices=[v.value for v in AgentVariant if v not in (AgentVariant.EXTERNAL,)],
        help="agent variant",
    )
    p.add_argument("--model", default="", help="model name (llm variant)")
    p.add_argument("--base-url", default="", help="OpenAI-compatible base URL (llm variant)")
    p.add_argument("--api-key-env", default="", help="variable holding the API key")
    p.add_argument("--cli", default="", help="agent CLI definition (cli variant; see ab agents)")
    p.add_argument("--max-calls", type=int, default=None, help="model calls budget (cli variant)")
    p.add_argument(
        "--agent-import-path",
        default="",
        metavar="MODULE:CLASS",
        help="the agent class (import variant; its module under AGENTBENCH_AGENT_IMPORT_PATHS)",
    )
    p.add_argument("--max-time-sec", type=int, default=None, help="agent time budget")
    p.add_argument("--config", default="", help="name of the model configuration to use/create")
    p.add_argument("--samples", type=int, default=1, help="attempts per task (default 1)")
    p.add_argument("--labels", default="", help="only tasks with all these labels (a,b)")
    p.add_argument("--task", action="append", default=[], help="only this task id (repeatable)")
    p.add_argument("--include-flaky", action="store_true", help="also run tasks labelled flaky")
    p.add_argument(
        "--backend",
        choices=["docker", "bwrap"],
        default="",
        help="the sandbox its attempts use (default: the worker's SANDBOX_BACKEND)",
    )
    p.add_argument("--wait", action="store_true", help="print progress until every attempt ends")
    p.add_argument(
        "--worker",
        action="store_true",
        help="start a local worker for the duration of the command (implies --wait)",
    )
    p.add_argument("--poll", type=float, default=2.0, help="seconds between progress lines")
    p.set_defaults(handler=cmd_run_suite)

    for name, help_text, handler in (
        ("cancel-run", "cancel a run: queued attempts end, running ones stop", cmd_cancel_run),
        ("retry-run", "retry the attempts of a run that ended for infrastructure", cmd_retry_run),
        ("resume-run", "re-send the messages of a run's queued attempts", cmd_resume_run),
        ("evaluate-run", "queue the not-evaluated attempts of a run", cmd_evaluate_run),
    ):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("run_id", help="the run's public id (or its first 8+ characters)")
        p.set_defaults(handler=handler)


def _suite(name: str):
    from tasks_app.models import Suite
    from tasks_app.services import tasks_import
    from tasks_app.spec import TaskSpecError

    suite = Suite.objects.filter(name=name).first()
    if suite is None and Path(settings.AB_TASKS_DIR).is_dir():
        try:
            report = tasks_import(directory=settings.AB_TASKS_DIR)
        except TaskSpecError as exc:
            raise CommandError(f"importing {settings.AB_TASKS_DIR}: {exc}") from exc
        print(f"imported tasks from {settings.AB_TASKS_DIR}: {report.summary()}")
        suite = Suite.objects.filter(name=name).first()
    if suite is None:
        raise CommandError(f"no suite named {name!r} (import it with `ab import-tasks DIR`)")
    return suite


def _model_config(args: argparse.Namespace) -> ModelConfig:
    if args.variant == AgentVariant.CLI and not args.cli:
        raise CommandError("--cli NAME is required with --variant cli (see ab agents)")
    # Named after the options, so runs with other options never share a configuration: the
    # CLI and its model ("cli:codex gpt-5-codex"), or the variant and its model ("llm:gpt-4o").
    if args.variant == AgentVariant.IMPORT:
        from runs.cli.agents import import_path_checked

        parts = [f"import:{import_path_checked(args.agent_import_path)}"]
    elif args.variant == AgentVariant.CLI:
        parts = [f"cli:{args.cli}", args.model or ""]
    else:
        parts = [f"{args.variant}:{args.model}" if args.model else args.variant]
    name = args.config or generated_name(*parts, base_url=args.base_url or "")
    from django.core.exceptions import ValidationError

    from runs.model_configs import upstream_audit, upstream_changes
    from runs.pipeline.adhoc import field_messages

    try:
        config, created = ModelConfig.objects.get_or_create(
            name=name,
            defaults={
                "agent_variant": args.variant,
                "model_name": args.model,
                "base_url": args.base_url,
                "api_key_env": args.api_key_env,
                "cli_agent": args.cli,
                "max_model_calls": args.max_calls,
                "agent_import_path": args.agent_import_path,
                **({"max_time_sec": args.max_time_sec} if args.max_time_sec else {}),
            },
        )
    except ValidationError as exc:  # a key variable or upstream the operator did not list
        raise CommandError(field_messages(exc)) from None
    if created:  # the operator's door: no account, audited like the others (the OS user)
        changes = upstream_changes(config, before=None)
        upstream_audit(None, config, changes, door=Door.CLI)
    if not created and config.agent_variant != args.variant:
        raise CommandError(
            f"--config: model configuration {name!r} is variant {config.agent_variant}, "
            f"not {args.variant}"
        )
    return config


def cmd_run_suite(args: argparse.Namespace) -> int:
    from runs.services import LaunchError

    if args.samples < 1:
        raise CommandError(f"--samples must be at least 1, got {args.samples}")
    suite = _suite(args.suite)
    config = _model_config(args)
    labels = [label.strip() for label in args.labels.split(",") if label.strip()]
    try:
        run = actions.run_launch(
            suite=suite,
            model_config=config,
            actor=None,
            door=Door.CLI,
            samples=args.samples,
            labels=labels or None,
            task_ids=args.task or None,
            include_flaky=args.include_flaky,
            backend=args.backend,
        )
    except LaunchError as exc:
        raise CommandError(str(exc)) from exc
    total = run.attempts.count()
    print(f"run {run.public_id}: {suite.name} x {config.name}, {total} attempt(s) queued")
    if not (args.wait or args.worker):
        return 0
    worker = LocalWorker(Supervisor()) if args.worker else None
    try:
        _wait(run, poll=args.poll)
    finally:
        if worker is not None:
            worker.shutdown()
    run.refresh_from_db()
    print(summary_table(run))
    return 0


# How long --wait gives a worker to settle a run whose attempts are all final.
SETTLE_WAIT_SEC = 30.0


def _wait(run: Run, *, poll: float) -> None:
    from runs.models import RUN_FINAL_STATES
    from runs.services import run_refresh_totals

    last_line = ""
    settled_by = 0.0
    idle_since = time.monotonic()
    hinted = False
    while True:
        run.refresh_from_db()
        totals = run_refresh_totals(run)
        by_status = totals.get("by_status", {})
        line = (
            f"{run.status}: "
            + ", ".join(f"{by_status.get(s, 0)} {s}" for s in ("queued", "running"))
            + f", {totals.get('final', 0)}/{totals.get('attempts', 0)} done"
        )
        if line != last_line:
            print(line, flush=True)
            last_line, idle_since = line, time.monotonic()
        if totals.get("final", 0) >= totals.get("attempts", 0):
            # The worker settles the run (finished, totals) right after its last attempt's
            # result is stored: give it that moment, so the summary does not say "running".
            settled_by = settled_by or time.monotonic() + SETTLE_WAIT_SEC
            if run.status in RUN_FINAL_STATES or time.monotonic() > settled_by:
                return
        if not hinted and time.monotonic() - idle_since > 60 and not by_status.get("running"):
            print("no attempt has started for a minute: is a worker running? (`ab worker`)")
            hinted = True
        time.sleep(poll)


def summary_table(run: Run) -> str:
    """Attempts of a run by outcome: one line per reason, with its category."""
    from django.db.models import Count

    rows = (
        run.attempts.values("status", "failure_reason_id")
        .annotate(n=Count("id"))
        .order_by("failure_reason_id", "status")
    )
    total = sum(r["n"] for r in rows) or 1
    lines = [f"{'outcome':<24} {'status':<10} {'category':<15} {'count':>5} {'share':>6}"]
    for row in rows:
        code = row["failure_reason_id"]
        category = Reason(code).info.category.value if code else "-"
        lines.append(
            f"{code or 'RESOLVED':<24} {row['status']:<10} {category:<15} "
            f"{row['n']:>5} {100 * row['n'] / total:>5.0f}%"
        )
    from runs.results.leaderboard import run_row

    board_row, left_out = run_row(run)
    if board_row is not None and board_row.score.rate is not None:
        lines.append(
            f"score {100 * board_row.score.rate:.1f}% ({board_row.score.resolved_label} tasks;"
            " the leaderboard's figure for this run)"
        )
    if left_out:
        lines.append(
            f"{left_out} task(s) of the suite left out of every rate: gold validation found "
            "them invalid (ab validate-suite --variant oracle)"
        )
    lines.append(f"run {run.public_id} {run.status}")
    if run.fail_fast_reason:
        lines.append(f"fail-fast: {run.fail_fast_reason}")
    return "\n".join(lines)


def run_by_ref(ref: str) -> Run:
    ref = ref.strip()
    try:
        return Run.objects.get(public_id=uuid.UUID(ref))
    except (ValueError, Run.DoesNotExist):
        pass
    if len(ref) >= 8:
        matches = list(Run.objects.filter(public_id__startswith=ref)[:2])
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            raise CommandError(f"run id {ref!r} is ambiguous: give more characters")
    raise CommandError(f"no run with id {ref!r}")


def cmd_cancel_run(args: argparse.Namespace) -> int:

    run = run_by_ref(args.run_id)
    if run.is_final:
        print(f"run {run.public_id} is already {run.status}; nothing to cancel")
        return 0
    count = actions.run_cancel(run=run, actor=None, door=Door.CLI)
    print(f"run {run.public_id} cancelled: {count} queued attempt(s) cancelled")
    return 0


def cmd_retry_run(args: argparse.Namespace) -> int:

    run = run_by_ref(args.run_id)
    count = actions.run_retry(run=run, actor=None, door=Door.CLI)
    print(f"run {run.public_id}: {count} attempt(s) queued again")
    return 0


def cmd_resume_run(args: argparse.Namespace) -> int:

    run = run_by_ref(args.run_id)
    count = actions.run_resume(run=run, actor=None, door=Door.CLI)
    print(f"run {run.public_id}: re-sent {count} queued attempt(s)")
    return 0


def cmd_evaluate_run(args: argparse.Namespace) -> int:

    run = run_by_ref(args.run_id)
    count = actions.run_evaluate(run=run, actor=None, door=Door.CLI)
    print(f"run {run.public_id}: {count} not-evaluated attempt(s) queued for the workers")
    return 0
