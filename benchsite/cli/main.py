"""The ``ab`` command line. Each app registers its own commands (``register(subparsers)``)."""

from __future__ import annotations

import argparse
import os
import sys
from importlib import import_module

from benchsite.cli.commands import COMMANDS

# One module per area; each defines register(subparsers) and adds its commands.
COMMAND_MODULES = tuple(dict.fromkeys(command.module for command in COMMANDS.values()))


class CommandError(Exception):
    """A user-facing failure: printed as one line on stderr, exit code 1 (or ``code``)."""

    def __init__(self, message: str, code: int = 1):
        super().__init__(message)
        self.code = code


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``ab`` parser. Every command is listed from the COMMANDS table; only ``command``'s
    module is imported and registers its real arguments (None: no module is imported)."""
    parser = argparse.ArgumentParser(
        prog="ab",
        description="AgentBench: run coding agents on tasks in sandboxes and compare outcomes.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    chosen = COMMANDS[command].module if command in COMMANDS else None
    for name, entry in COMMANDS.items():
        if entry.module != chosen:
            sub.add_parser(name, help=entry.help)
    if chosen is not None:
        import_module(chosen).register(sub)
    return parser


def _command_name(argv: list[str]) -> str | None:
    """The subcommand in argv: the first word that is not an option (``ab`` has only -h)."""
    return next((word for word in argv if not word.startswith("-")), None)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    command = _command_name(argv)
    needs_db = command in COMMANDS and COMMANDS[command].needs_db
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchsite.settings")
    if needs_db:
        import django

        django.setup()
    parser = build_parser(command)
    args = parser.parse_args(argv)
    if needs_db:
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
    """Apply pending migrations so every command works on a fresh database.

    Cheap path first: the migration files' names against the django_migrations table (one
    query); Django's executor graph (~0.5 s) is built only when they differ."""
    from django.core.management import call_command
    from django.db import DEFAULT_DB_ALIAS, connections

    if _migration_files() <= _applied_migrations(connections[DEFAULT_DB_ALIAS]):
        return
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connections[DEFAULT_DB_ALIAS])
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    if plan:
        print(f"ab: applying {len(plan)} database migration(s)", file=sys.stderr)
        call_command("migrate", verbosity=0, interactive=False)


def _migration_files() -> set[tuple[str, str]]:
    """(app label, migration name) of every migration file of the installed apps."""
    from pathlib import Path

    from django.apps import apps

    found = set()
    for config in apps.get_app_configs():
        folder = Path(config.path) / "migrations"
        for path in folder.glob("[0-9]*.py"):
            found.add((config.label, path.stem))
    return found


def _applied_migrations(connection) -> set[tuple[str, str]]:
    """(app, name) rows of django_migrations; empty when the table does not exist yet."""
    from django.db import DatabaseError

    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT app, name FROM django_migrations")
            return {(app, name) for app, name in cursor.fetchall()}
    except DatabaseError:
        return set()


if __name__ == "__main__":
    # Under `python -m benchsite.cli.main` this file is __main__, a second copy of the module: the
    # commands raise benchsite.cli.main.CommandError, which only the imported copy's main() catches.
    from benchsite.cli.main import main as imported_main

    sys.exit(imported_main())
