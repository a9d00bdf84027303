"""Shared fixtures. Personas: alice is staff, bob is a plain user."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
TASKS_DIR = REPO_ROOT / "tasks"
SHARED_DIR = REPO_ROOT.parent / "shared"


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user(
        "alice", "alice@example.org", "alice-password", is_staff=True, is_superuser=True
    )


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create_user("bob", "bob@example.org", "bob-password")


@pytest.fixture
def custom_dev(db):
    """The custom-dev example suite imported into the database."""
    from tasks_app.services import tasks_import

    tasks_import(directory=TASKS_DIR)
    from tasks_app.models import Suite

    return Suite.objects.get(name="custom-dev")
