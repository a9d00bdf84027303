"""``ab`` commands about runs: run-suite, results, the pipeline commands, the worker processes.

Each module registers its commands (see benchsite/cli/commands.py) and imports what a command
needs inside the command, so ``ab --help`` loads none of them. The top layer: may import any
role except ``web``.
"""
