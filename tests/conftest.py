"""Shared fixtures. Personas: alice is staff, bob is a reader (an account in the "readers"
group: patches, logs and transcripts), dave is a plain account that is no reader."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
TASKS_DIR = REPO_ROOT / "tasks"
# The shared data beside the checkout (CI: a fresh clone with shared/ beside it); a git
# worktree elsewhere names it with AB_SHARED_DIR.
SHARED_DIR = Path(os.environ.get("AB_SHARED_DIR") or REPO_ROOT.parent / "shared")

# Parallel workers (groups and a folder of each worker's own, tests/support/parallel.py), and the
# shared fixtures, loaded once for every test module: a test takes a fixture by naming it, and
# imports only the helper functions it calls. Each fixture name has one meaning across these
# modules.
pytest_plugins = [
    "tests.support.parallel",
    "tests.support.backends",
    "tests.support.agent_fixtures",
    "tests.support.api_fixtures",
    "tests.support.browser_fixtures",
    "tests.support.gateway_fixtures",
    "tests.support.netns_fixtures",
    "tests.support.orchestration_fixtures",
    "tests.support.pages_fixtures",
    "tests.support.partial_fixtures",
    "tests.support.private_dockerd",
    "tests.support.verified_fixtures",
]


def _allow_the_fake_providers_keys() -> None:
    """The variables the tests' fake providers take their keys from are on this session's list
    (GATEWAY_API_KEY_ENVS, runs/upstreams.py), as an operator would list theirs: in the settings
    of this process (Django is set up before conftest loads) and for the workers it starts."""
    from django.conf import settings

    from runs.upstreams import DEFAULT_KEY_ENVS

    names = [*DEFAULT_KEY_ENVS, "AB_TEST_UPSTREAM_KEY", "AB_TEST_FAKE_KEY", "H3_FAKE_KEY"]
    os.environ["GATEWAY_API_KEY_ENVS"] = ",".join(names)
    settings.GATEWAY_API_KEY_ENVS = names


_allow_the_fake_providers_keys()


@pytest.fixture(autouse=True)
def _failure_reasons_after_flush(request):
    """A transactional test ends by flushing every table, the data migrations' rows included
    (the 15 failure reasons, the readers group, the shipped prices); put them back for each
    database test that follows. pytest-django runs the plain tests before the transactional
    ones, but only within one process: a parallel worker may get a plain test after a
    transactional one."""
    marker = request.node.get_closest_marker("django_db")
    transactional = (
        "transactional_db" in request.fixturenames
        or "live_server" in (request.fixturenames)
        or bool(marker and marker.kwargs.get("transaction"))
    )
    if transactional:
        request.getfixturevalue("transactional_db")
    elif marker or "db" in request.fixturenames:
        request.getfixturevalue("db")
    else:
        return
    from benchsite.accounts.access import readers_group
    from runs.models import FailureReason

    if transactional or not FailureReason.objects.exists():
        FailureReason.objects.sync_from_taxonomy()
        readers_group()
        _ship_list_prices()


def _ship_list_prices() -> None:
    """The price table's shipped rows (runs 0023's data migration), when a flush took them."""
    import importlib

    from django.apps import apps

    from runs.prices import PriceEntry

    if not PriceEntry.objects.exists():
        importlib.import_module("runs.migrations.0023_price_table").ship_list_prices(apps, None)


@pytest.fixture(autouse=True)
def _empty_page_cache():
    """Each test starts with no cached page (runs/web/page_cache.py). A test's writes are rolled
    back at its end, data version included: the next test's same version must not find the
    pages of the data it never had."""
    from django.core.cache import caches

    caches["pages"].clear()


@pytest.fixture(autouse=True)
def _empty_default_cache():
    """Rate-limit counters live in the default cache, which outlives a test's database: each
    test starts and ends with it empty."""
    from django.core.cache import cache

    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user(
        "alice", "alice@example.org", "alice-password", is_staff=True, is_superuser=True
    )


@pytest.fixture
def bob(django_user_model):
    from benchsite.accounts.access import readers_group

    bob = django_user_model.objects.create_user("bob", "bob@example.org", "bob-password")
    bob.groups.add(readers_group())
    return bob


@pytest.fixture
def dave(django_user_model):
    return django_user_model.objects.create_user("dave", "dave@example.org", "dave-password")


@pytest.fixture
def custom_dev(db):
    """The custom-dev example suite imported into the database."""
    from tasks_app.services import tasks_import

    tasks_import(directory=TASKS_DIR)
    from tasks_app.models import Suite

    return Suite.objects.get(name="custom-dev")
