"""``ab`` commands about tasks: list, check and import task specs, the SWE-bench imports and builds.

Each module registers its commands (benchsite/cli/commands.py) and imports inside commands.
"""
