"""What lets the suite run in parallel workers (pytest-xdist, ``--dist loadgroup``).

Each worker is a process of its own, with its own test database, page cache and environment;
what they share is the machine: the Docker engine, the host's network, /var/lib/agentbench.
What keeps them apart, and what lets a test take its time:

* **Groups** (``xdist_group``): the tests of a group run in one worker, one after another.
  A test joins a group when it uses a fixture that stands for something only one process may
  hold at a time (``SHARED_FIXTURES``), when it uses a module-scoped fixture (an image build,
  a server, a compose stack: built once for the module's tests, not once per worker), or when
  its module is listed in ``MODULE_GROUPS`` with the reason. Every other test goes to
  whichever worker is free.
* **Time limits**: ``TIMEOUTS`` gives the modules that need it more than the suite's limit.
* **Folders of one's own**: the attempts a worker runs in this process keep their artifacts
  under a folder of that worker (run folders are named by the second they start in, so two
  workers starting the same task at once would otherwise share one).

Without xdist (``-p no:xdist`` or no ``-n``) nothing changes: the groups are plain markers.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Fixture -> group: what a fixture sets up that only one worker may have at a time.
SHARED_FIXTURES = {
    # A network namespace routed from a fixed host address (198.51.100.1/24): a second one at
    # the same time would take the same address on another interface.
    "fake_internet": "fake-internet",
    # One private Docker engine per data root at a time (it takes a lock): tests of two
    # workers would wait for each other, holding a worker each.
    "private_dockerd": "private-dockerd",
}

# Test modules are named by their path under tests/ (``module_of``): a file's name alone may
# be another folder's too.

# Test module -> group, for modules that share something no fixture names; each with why.
MODULE_GROUPS = {
    # Both build real levels into the shared SWE-bench cache (/var/lib/agentbench/swebench),
    # and one checks that a failed build leaves no new tree there: no other build may add one
    # meanwhile.
    "sandbox/environments/test_swebench_offline.py": "swebench-shared-cache",
    "sandbox/environments/test_swebench_envs.py": "swebench-shared-cache",
}

# Test module -> seconds, for modules whose tests legitimately need more than the suite's
# limit (pyproject's ``timeout``): a fixture's set-up counts toward the limit, and a cold
# machine builds what a warm one finds cached.
TIMEOUTS = {
    # Builds the app image offline first (its own limit: 2400 s), then runs the compose stack.
    "benchsite/test_deploy_compose.py": 3600,
    # Real SWE-bench levels (a debootstrapped base, venvs, conda) built on a cold cache.
    "sandbox/environments/test_swebench_offline.py": 2700,
    "sandbox/environments/test_swebench_envs.py": 2700,
    "sandbox/environments/test_swebench_cache.py": 1800,
    "runs/pipeline/test_swebench_network.py": 1800,
    # Builds an instance from commits fetched from a git server on loopback, validates it twice.
    "sandbox/environments/test_swebench_git_fetch.py": 1800,
    # Builds an instance of its own and validates it on both backends.
    "runs/pipeline/test_swebench_cpus.py": 1800,
    "runs/pipeline/test_swebench_scale.py": 1800,
    # Every agent CLI end to end through the gateway, on both backends.
    "runs/agents/cli/test_cli_agents_e2e.py": 1800,
}


# Modules whose tests take minutes (the durations report of a full run): in parallel they are
# handed out first, so the longest ones do not start last and keep one worker busy at the end.
FIRST = (
    "sandbox/environments/test_swebench_envs.py",
    "runs/pipeline/test_swebench_network.py",
    "benchsite/test_deploy_compose.py",
    "benchsite/api/test_api_schemathesis.py",
    "runs/agents/cli/test_cli_agents_e2e.py",
    "sandbox/environments/test_swebench_cache.py",
    "runs/pipeline/test_swebench_scale.py",
    "runs/pipeline/test_swebench_run.py",
)


def _module_scoped(item: pytest.Item) -> bool:
    """Whether the test uses a fixture of the suite's own built once per module (or class);
    pytest-django's (no ``baseid``) are set up per worker anyway."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(
        defs and defs[-1].baseid and defs[-1].scope in ("module", "class")
        for defs in info.name2fixturedefs.values()
    )


TESTS = Path(__file__).resolve().parents[1]


def module_of(item: pytest.Item) -> str:
    """The test's module as the tables above name it: its path under tests/."""
    path = item.path.resolve()
    return path.relative_to(TESTS).as_posix() if path.is_relative_to(TESTS) else path.name


def group_of(item: pytest.Item) -> str | None:
    for fixture, group in SHARED_FIXTURES.items():
        if fixture in getattr(item, "fixturenames", ()):
            return group
    module = module_of(item)
    if module in MODULE_GROUPS:
        return MODULE_GROUPS[module]
    if _module_scoped(item):
        return f"module-{module.removesuffix('.py')}"
    return None


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups (its hook is a plain one)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        seconds = TIMEOUTS.get(module_of(item))
        if seconds and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(seconds))
        if item.get_closest_marker("xdist_group"):
            continue  # a test module's own choice wins
        group = group_of(item)
        if group:
            item.add_marker(pytest.mark.xdist_group(group))


@pytest.hookimpl(tryfirst=True)  # before a worker sends its collection to xdist's controller
def pytest_collection_finish(session: pytest.Session) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):  # every worker sorts alike (a stable sort)
        session.items.sort(
            key=lambda item: (
                FIRST.index(module_of(item)) if module_of(item) in FIRST else len(FIRST)
            )
        )


def pytest_configure(config: pytest.Config) -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        return
    from django.conf import settings

    settings.ARTIFACTS_ROOT = Path(settings.ARTIFACTS_ROOT) / f"xdist-{worker}"
