"""The lazy ``ab`` parser lists exactly the commands the modules register."""

import argparse
import subprocess
import sys
from importlib import import_module

from benchsite.cli.commands import COMMANDS


def test_it_lists_every_command_the_modules_register():
    registered = {}
    for module in dict.fromkeys(entry.module for entry in COMMANDS.values()):
        sub = argparse.ArgumentParser().add_subparsers()
        import_module(module).register(sub)
        for action in sub._choices_actions:
            registered[action.dest] = (module, action.help)
    assert {name: (e.module, e.help) for name, e in COMMANDS.items()} == registered


def test_it_prints_every_command_in_help_without_importing_command_modules():
    code = (
        "import sys; from benchsite.cli.main import main\n"
        "try: main(['--help'])\n"
        "except SystemExit: pass\n"
        "prefixes = ('celery', 'runs.', 'tasks_app.')\n"
        "print('LOADED', sorted(m for m in sys.modules if m.startswith(prefixes)))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    out = done.stdout
    for name in COMMANDS:
        assert name in out
    assert out.strip().endswith("LOADED []")


def test_a_database_command_loads_neither_celery_nor_kombu(tmp_path):
    """`ab leaderboard` reads the database only: Django is set up, the broker's code is not
    loaded (it is for commands that send or run work)."""
    env_code = (
        "import os, sys; from benchsite.cli.main import main\n"
        "try: main(['leaderboard', 'custom-dev'])\n"
        "except SystemExit: pass\n"
        "print('DJANGO', 'django.db.models' in sys.modules)\n"
        "print('LOADED', sorted(m for m in sys.modules if m.split('.')[0] in {'celery', 'kombu'}))"
    )
    env = {"AB_VAR_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", env_code], capture_output=True, text=True, env=env, check=True
    )
    assert "DJANGO True" in done.stdout
    assert done.stdout.strip().endswith("LOADED []"), done.stdout[-2000:]
