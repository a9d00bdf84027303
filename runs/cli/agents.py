"""``ab run-agent``: one agent on one task in a sandbox, recorded as an attempt."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from django.conf import settings

from benchsite.cli.main import CommandError

AGENT_VARIANTS = ("scripted", "oracle", "nop", "llm", "cli", "import")
BACKENDS = ("auto", "docker", "bwrap")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run-agent",
        help="run an agent (scripted, oracle, nop or an LLM) on one task and record the attempt",
    )
    p.add_argument("--task", required=True, type=Path, metavar="TASK.yaml", help="the task file")
    p.add_argument(
        "--variant",
        choices=AGENT_VARIANTS,
        default=None,
        help="agent to run (default: the task's agent.entrypoint, else scripted)",
    )
    p.add_argument("--model", default="", help="model name (llm, cli), e.g. gpt-4o-mini")
    p.add_argument("--cli", default="", help="agent CLI definition (cli variant; see ab agents)")
    p.add_argument("--max-calls", type=int, default=None, help="model calls budget (cli)")
    p.add_argument(
        "--agent-import-path",
        default="",
        metavar="MODULE:CLASS",
        help="the agent class (import variant; its module under AGENTBENCH_AGENT_IMPORT_PATHS)",
    )
    p.add_argument(
        "--base-url", default="", help="OpenAI-compatible API base URL (default: LLM_BASE_URL)"
    )
    p.add_argument(
        "--api-key-env",
        default=None,
        help="environment variable holding the API key (default: LLM_API_KEY_ENV)",
    )
    p.add_argument(
        "--max-steps",
        type=int,
        default=None,
        help="tool-call budget (a task's own agent.max_steps takes precedence)",
    )
    p.add_argument("--max-time-sec", type=int, default=None, help="agent time budget")
    p.add_argument("--strict-patch", action="store_true", help="accept only standard unified diffs")
    p.add_argument(
        "--skip-baseline", action="store_true", help="do not check that the tests fail first"
    )
    p.add_argument(
        "--log-llm-messages",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="keep llm_messages.jsonl (default: AGENTBENCH_LOG_LLM_MESSAGES)",
    )
    p.add_argument(
        "--out", type=Path, default=None, help="artifacts folder (default: ARTIFACTS_ROOT)"
    )
    p.add_argument(
        "--backend",
        choices=BACKENDS,
        default=None,
        help="sandbox backend (default: SANDBOX_BACKEND; auto = Docker if it works, else bwrap)",
    )
    p.set_defaults(handler=cmd_run_agent)

    p = sub.add_parser(
        "agents", help="list the agent variants and agent CLI definitions (shipped and added)"
    )
    p.add_argument(
        "--install",
        metavar="NAME",
        action="append",
        default=[],
        help="build this CLI's install into the cache now (repeatable; 'all')",
    )
    p.set_defaults(handler=cmd_agents)


def cmd_run_agent(args: argparse.Namespace) -> int:
    from runs.models import RunStatus
    from runs.pipeline import artifacts
    from runs.pipeline.adhoc import attempt_create_adhoc, run_close
    from runs.pipeline.execute import attempt_execute

    task, entrypoint = _import_task(args.task)
    variant = args.variant or (entrypoint if entrypoint in AGENT_VARIANTS else "scripted")
    config = _model_config(args, variant)
    with artifacts.root_override(args.out):
        attempt = attempt_create_adhoc(task=task, model_config=config)
        status = RunStatus.FINISHED
        try:
            attempt = attempt_execute(
                attempt, backend=args.backend, skip_baseline=args.skip_baseline
            )
        except KeyboardInterrupt:
            status = RunStatus.CANCELLED
            raise
        finally:
            run_close(run=attempt.run, status=status)
        _print(attempt)
    return 0 if attempt.resolved else 1


def _import_task(task_file: Path):
    from tasks_app.models import Task
    from tasks_app.services import local_path_rules, tasks_import
    from tasks_app.spec import TaskSpecError, load_task_file

    if not task_file.is_file():
        raise CommandError(f"--task: no such task file: {task_file}")
    try:
        loaded = load_task_file(task_file, rules=local_path_rules(task_file))
        tasks_import(directory=task_file)
    except TaskSpecError as exc:
        raise CommandError(f"invalid task file:\n{exc}") from exc
    task = Task.objects.select_related("suite").get(
        suite__name=loaded.spec.suite, task_id=loaded.spec.id
    )
    return task, loaded.spec.agent.entrypoint


def import_path_checked(path: str) -> str:
    """``path`` if it names a usable agent class (imported now), else a CommandError naming
    the option: a bad path is refused before any configuration is stored."""
    from runs.agents.imported import ImportPathError, resolve

    if not path:
        raise CommandError("--agent-import-path MODULE:CLASS is required with --variant import")
    try:
        resolve(path, settings.AGENT_IMPORT_PATHS)
    except ImportPathError as exc:
        raise CommandError(f"--agent-import-path: {exc}") from None
    return path


def _model_config(args: argparse.Namespace, variant: str):
    """The model configuration these options describe, named after them so that runs with
    different options never share (and silently change) one configuration."""
    from runs.model_configs import generated_name
    from runs.pipeline.adhoc import model_config_for_variant

    fields: dict[str, object] = {"strict_patch": args.strict_patch}
    name = variant
    if variant == "cli":
        if not args.cli or not args.model:
            raise CommandError("--cli NAME and --model are required with --variant cli")
        key_env = args.api_key_env or settings.LLM_API_KEY_ENV
        fields |= {
            "model_name": args.model,
            "base_url": args.base_url,
            "api_key_env": key_env,
            "cli_agent": args.cli,
            "max_model_calls": args.max_calls,
        }
        name = generated_name(f"cli:{args.cli}", args.model, base_url=args.base_url or "")
        if args.max_calls is not None:
            name += f" calls={args.max_calls}"
    if variant == "import":
        fields["agent_import_path"] = import_path_checked(args.agent_import_path)
        name = f"import:{args.agent_import_path}"
    if variant == "llm":
        if not args.model:
            raise CommandError("--model is required with --variant llm")
        key_env = args.api_key_env or settings.LLM_API_KEY_ENV
        if not os.environ.get(key_env):
            print(
                f"ab run-agent: note: ${key_env} is not set; calling the API without a key",
                file=sys.stderr,
            )
        fields |= {"model_name": args.model, "base_url": args.base_url, "api_key_env": key_env}
        name = generated_name("llm", args.model, base_url=args.base_url or "")
    if args.strict_patch:
        name += " (strict patch)"
    if args.max_steps is not None:
        if args.max_steps < 1:
            raise CommandError("--max-steps must be at least 1")
        fields["max_steps"] = args.max_steps
        name += f" steps={args.max_steps}"
    if args.max_time_sec is not None:
        if args.max_time_sec < 1:
            raise CommandError("--max-time-sec must be at least 1")
        fields["max_time_sec"] = args.max_time_sec
        name += f" time={args.max_time_sec}s"
    if args.log_llm_messages is not None:
        fields["log_llm_messages"] = args.log_llm_messages
    try:
        return model_config_for_variant(variant, name=name, **fields)
    except ValueError as exc:
        raise CommandError(str(exc)) from exc


def _print(attempt) -> None:
    from runs.pipeline import artifacts

    print(
        f"task {attempt.suite.name}/{attempt.task.task_id}  agent {attempt.model_config.name}"
        f"  (attempt {attempt.public_id})"
    )
    rows = [
        (
            s.name,
            "" if s.exit_code is None else str(s.exit_code),
            f"{s.duration_sec or 0:.2f}s",
            s.output_path,
        )
        for s in attempt.stages.order_by("order")
    ]
    table = [("stage", "exit", "time", "log"), *rows]
    widths = [max(len(row[i]) for row in table) for i in range(4)]
    for row in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    print(
        f"steps {attempt.steps}, tokens {attempt.tokens_in} in / {attempt.tokens_out} out, "
        f"cost ${attempt.cost_usd}"
    )
    if attempt.resolved:
        print("result: RESOLVED (the tests pass)")
    else:
        kind = "infrastructure" if attempt.is_infra else "agent"
        print(f"result: {attempt.failure_reason_id} in {attempt.failure_stage} ({kind})")
        if attempt.error_text:
            print("  " + attempt.error_text.splitlines()[0])
    print(f"artifacts: {artifacts.folder_of(attempt.artifacts_dir)}")


def cmd_agents(args: argparse.Namespace) -> int:
    """The built-in variants, then every agent CLI definition with its pinned package and
    whether its install is in the cache; ``--install`` builds installs."""
    from runs.agent_clis import all_definitions
    from runs.agents.cli.definition import DefinitionError
    from runs.agents.cli.install import InstallError, cached_install, ensure_install, install_root

    print(
        "built-in variants: scripted, oracle, nop, llm, external (imported), cli (below), "
        "import (--agent-import-path MODULE:CLASS, docs/agents.md)"
    )
    try:
        definitions, unusable = all_definitions()
    except DefinitionError as exc:
        raise CommandError(f"invalid agent CLI definition:\n{exc}") from exc
    wanted = set(args.install)
    unknown = wanted - set(definitions) - {"all"}
    if unknown:
        raise CommandError(
            f"--install: no agent CLI {sorted(unknown)[0]!r}; known: " + ", ".join(definitions)
        )
    rows = [("cli agent", "runs in", "wire API", "context file", "package", "from", "install")]
    failed = False
    for name, definition in definitions.items():
        spec = definition.spec
        # The CLI, then its runtime (Node) where it has one: one state each.
        parts = [p for p in (definition, definition.runtime_part()) if p is not None]
        states = []
        for part in parts:
            prefix = "runtime " if part.part == "runtime" else ""
            if "all" in wanted or name in wanted:
                try:
                    built = ensure_install(part)
                    state = f"{prefix}{'built' if built.built else 'cached'} {built.path}"
                    if built.repaired:
                        state += f" (rebuilt: the cached one failed its check: {built.repaired})"
                except InstallError as exc:
                    state, failed = f"{prefix}FAILED: {exc}", True
            else:
                found = cached_install(part)
                state = prefix + (
                    str(found) if found else f"not built (ab agents --install {name})"
                )
            states.append(state)
        state = "; ".join(states)
        context = spec.context_file or "-"
        rows.append(
            (name, spec.runs_in, spec.wire_api, context, spec.install.pin, definition.origin, state)
        )
    widths = [max(len(r[i]) for r in rows) for i in range(6)]
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row[:6], widths, strict=True)) + "  " + row[6])
    for problem in unusable:
        print(f"not usable: {problem}")
    print(f"install cache: {install_root()}")
    return 1 if failed else 0
