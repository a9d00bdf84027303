"""The ``ab`` command line. Each app registers its own commands (``register(subparsers)``)."""

from __future__ import annotations

import argparse
import os
import sys
from importlib import import_module

# One module per area; each defines register(subparsers) and adds its commands.
COMMAND_MODULES = (
    "benchsite.cli_app",
    "tasks_app.cli",
    "tasks_app.cli_swebench",
    "tasks_app.cli_swebench_build",
    "runs.cli_runs",
    "runs.cli_results",
    "runs.cli_worker",
    "runs.cli_pipeline",
    "runs.cli_agents",
)


class CommandError(Exception):
    """A user-facing failure: printed as one line on stderr, exit code 1 (or ``code``)."""

    def __init__(self, message: str, code: int = 1):
        super().__init__(message)
        self.code = code


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ab",
        description="AgentBench: run coding agents on tasks in sandboxes and compare outcomes.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module_name in COMMAND_MODULES:
        import_module(module_name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchsite.settings")
    import django

    django.setup()
    parser = build_parser()
    args = parser.parse_args(argv)
    _migrate_if_needed()
    try:
        result = args.handler(args)
    except CommandError as exc:
        print(f"ab {args.command}: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        print(f"ab {args.command}: interrupted", file=sys.stderr)
        return 130
    return int(result or 0)


def _migrate_if_needed() -> None:
    """Apply pending migrations so every command works on a fresh database."""
    from django.core.management import call_command
    from django.db import DEFAULT_DB_ALIAS, connections
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connections[DEFAULT_DB_ALIAS])
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    if plan:
        print(f"ab: applying {len(plan)} database migration(s)", file=sys.stderr)
        call_command("migrate", verbosity=0, interactive=False)


if __name__ == "__main__":
    # Under `python -m benchsite.cli` this file is __main__, a second copy of the module: the
    # commands raise benchsite.cli.CommandError, which only the imported copy's main() catches.
    from benchsite.cli import main as imported_main

    sys.exit(imported_main())
